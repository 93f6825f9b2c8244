// Package kcpproxy is a test stand-in for kcp's URL space in front of a real kube-apiserver.
//
// kcp cannot be built or imported here, so the e2e tests of mapper-apiserver's kcp source mode
// (--source-mode=kcp) run against a [Proxy] instead: a real kube-apiserver stores the objects,
// and the proxy serves them under kcp's paths the way mapper-apiserver reads and writes them:
//
//	/clusters/*/<api path>          the wildcard endpoint: list and watch across all logical clusters
//	/clusters/<cluster>/<api path>  one logical cluster: get, list, watch, create, update, patch
//	                                (also of the status subresource), delete, deletecollection
//
// # Storage layout
//
// Namespace ns of logical cluster c is the namespace "c--ns" of the backing kube-apiserver
// ([BackingNamespace], [Separator]). A cluster name accepted by the proxy is a DNS label
// without "--" ([ValidateClusterName]), so the first "--" of a backing namespace always ends
// the cluster and the split is unambiguous even when ns itself contains "--". Backing
// namespaces without the separator (default, kube-system, ...) belong to no logical cluster
// and are never shown.
//
// The proxy rewrites request paths, the metadata.namespace of request bodies (and the name of
// Namespace objects), field selectors on metadata.namespace, and, on the way back, objects,
// lists, every watch frame and Status messages and details. Every object it returns carries
// kcp.io/cluster, derived from where it is stored, as kcp sets it. The annotation is never
// stored: a write whose body (or patch) sets it to its cluster has it removed, and a write
// that sets it to another value or removes it is rejected with 422 Invalid, so it is immutable
// as in kcp. resourceVersions are the backing server's: one resourceVersion space for all
// logical clusters, as on one kcp shard. Watches are streamed frame by frame (never buffered).
// Discovery and other non-resource paths (/api, /apis, /version, /openapi) pass through.
//
// # Limits
//
//   - The proxy forwards every request with its own identity (the backing config's); it does
//     not authenticate its clients. It is a loopback test fixture, not a security boundary.
//   - JSON only: resource requests are forwarded with Accept: application/json, or JSON with
//     as=PartialObjectMetadata(List) for client-go's metadata client (no protobuf, no Table);
//     protobuf request bodies answer 415.
//   - Cluster-scoped resources other than namespaces (CRDs, RBAC, ...) are not emulated: a
//     request for one answers 400. Discovery is the backing server's, the same for every
//     cluster (kcp serves per-workspace APIs through APIBindings; see docs/views.md).
//   - The wildcard endpoint serves list and watch only (as kcp's); a wildcard request with a
//     namespace lists that namespace in every cluster, and a field selector on
//     metadata.namespace there answers 400.
//   - Names inside other fields (ownerReferences have none; an Event's involvedObject.namespace,
//     a RoleBinding subject's namespace) are not rewritten.
//   - Cluster names are DNS labels; kcp's path-like names with ":" are refused (400).
package kcpproxy
