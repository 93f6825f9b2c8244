// Package cache is the indexed cache of the source API server behind mapper-apiserver.
//
// It mirrors every selected resource of the source with one client-go reflector each
// (see Cache), listing and watching through a Source (pkg/source implements it; the cache holds
// no client of its own), and keeps for each resource a ResourceStore that
//
//   - indexes the objects by location (the kcp.io/assigned-locations annotation, see
//     ParseLocations and docs/design.md), one ordered B-tree per location, so that serving a
//     location costs in proportion to that location's objects, not to the cache total;
//   - records a bounded event history so that a watch can resume from a resourceVersion,
//     answering 410 Gone ("too old resource version") like kube-apiserver's watch cache;
//   - fans events out to per-location watchers: each event is routed only to the watchers
//     of the locations the object had before or has after the event, and turned into
//     ADDED / MODIFIED / DELETED for each watcher the same way kube-apiserver's cacher turns
//     an object that starts or stops matching a label selector into ADDED or DELETED;
//   - shares one immutable *Object per object version among all readers. An Object is kept
//     as bytes: its JSON and the view of each of its locations are encoded once when the
//     version is stored, the decoded tree is dropped (see Object), and its watch frames are
//     cached (runtime.CacheableObject) so that an event going to many watchers is encoded
//     once per wire format.
//
// The behaviour follows k8s.io/apiserver/pkg/storage/cacher (watch_cache.go, cache_watcher.go,
// caching_object.go) wherever the location view needs the same semantics as kube-apiserver.
package cache
