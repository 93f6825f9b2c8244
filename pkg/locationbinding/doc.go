// Package locationbinding decides which locations the objects of a namespace may use
// (docs/tenancy.md): the LocationBindings (control.mapper.kcp.io/v1alpha1) of the namespace,
// each a label selector over the SyncTargets and a list of location names, bind the locations
// they select. In the Bound location-access mode a location's view shows an object only when
// the object's namespace (with a kcp source: its logical cluster and namespace) is bound to the
// location, Placements choose only among bound locations, and CEL sees only bound locations.
//
// The package is pure logic: Compile turns a LocationBinding into a Binding, NewIndex makes
// the immutable Index of every binding over the registered locations, and the Index answers
// Binds per (cluster, namespace, location) without allocating. mapper-apiserver's views
// (pkg/customization's Follower, pkg/cache) and mapper-controller's controllers build their
// Index from their own informers.
package locationbinding
