// Package binding is mapper-controller's side of location access (docs/tenancy.md): a
// Tracker that keeps the locationbinding.Index of the source's LocationBindings over its
// SyncTargets for the controllers (Placements choose only bound locations, StatusCollectors
// see only bound locations), a Controller that keeps each LocationBinding's status (the
// locations it binds, and whether its spec is valid), and a Reporter that records a Warning
// Event on every object whose kcp.io/assigned-locations names a location not bound to its
// namespace (mapper-apiserver's views ignore that assignment). All of them run under
// mapper-controller's leader election; in the Open mode none runs.
package binding
