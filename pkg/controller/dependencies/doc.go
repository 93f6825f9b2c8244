// Package dependencies is mapper-controller's dependency controller (docs/dependencies.md):
// what an assigned object references follows it. For every object that holds a Pod template
// (pkg/dependencies) or that a DependencyRule names, and that is assigned to locations (by a
// Placement, by hand or otherwise), the objects it references in its namespace are assigned
// to the union of the locations of the objects referencing them. A ResourceMapping's related
// entries of origin Source reference too (mappings.go), at the locations of the mapping only.
//
// Ownership: the controller writes kcp.io/assigned-locations and its own record
// control.mapper.kcp.io/dependency-locations (the locations it added) with server-side apply
// under the field manager mapper-controller-dependencies, with the object's resourceVersion as
// precondition, and trusts the record only while that field manager owns it
// (metadata.managedFields). An object keeps every location it got otherwise; a location the
// controller added leaves only when no object referencing it is assigned there or still
// carries that location's finalizer, and only once every informer the decision reads has
// synced and every referencing object's references are known.
//
// One key is one namespace (with its logical cluster in kcp mode), as for Placements.
package dependencies
