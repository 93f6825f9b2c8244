// Package source is mapper-apiserver's gateway to the source API server (docs/design.md, "What the system is"):
// its clients, with the server's own identity, for discovery (which resources to mirror,
// ResourceInfo), the list and watch that feed the cache, the consistent-read probe (the
// source's current resourceVersion, shared by concurrent callers), live reads by name, and the
// clients that write status back, on a plain source or on each logical cluster of a kcp source
// (sourcecluster.ClusterClients).
//
// It holds no objects and imports nothing of the cache: pkg/cache keeps, indexes and fans out
// what Source lists and watches, and pkg/registry/view serves it.
package source
