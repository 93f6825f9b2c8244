// Package clusterinformer is an informer whose store keeps the objects of several logical
// clusters apart: its keys are contract.Keys ("cluster|namespace/name"), not client-go's
// namespace/name.
//
// A kcp source is read through its wildcard endpoint (/clusters/*), where the same
// namespace/name may exist in several logical clusters, each object's cluster named by its
// kcp.io/cluster annotation (docs/design.md, "Names"). client-go's
// SharedIndexInformer hard-codes MetaNamespaceKeyFunc in its queue and store, so there the
// second of two such objects overwrites the first. An Informer is client-go's own machinery (a
// Reflector feeding a DeltaFIFO, processed into an Indexer by a cache.Controller) with a
// cluster-aware key function in both the queue and the store, and paginated lists only (see
// WithoutStreamingLists).
//
// The mapper's view informers (pkg/mapper) and the Customization follower
// (pkg/customization) use it.
package clusterinformer
