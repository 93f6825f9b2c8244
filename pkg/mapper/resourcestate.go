package mapper

import "sort"

// ResourceState is whether one mapped resource is synced or halted, as the mapper's
// SyncTarget status reports it.
type ResourceState struct {
	// Resource is the GroupResource string ("configmaps", "deployments.apps").
	Resource string
	// Halted is true while the target does not serve the resource (its CRD is missing): its
	// objects wait, nothing is applied or deleted.
	Halted bool
	// Known is false until the target's discovery has been read for the resource.
	Known bool
	// Schema is the comparison of the source's and the target's schemas of the resource's
	// kind (checkSchemas); Compatible when they are not compared.
	Schema SchemaState
	// Conflicts is the number of the resource's objects not mapped because their target
	// place is taken (by another source object's copy, or an object the mapper does not
	// manage); each one's outcome record says by what.
	Conflicts int
	// Blocked, when not empty, says why a ResourceMapping keeps the resource halted
	// (Projection.Blocked).
	Blocked string
}

// ResourceStates returns the state of every mapped resource, sorted by Resource. It is safe
// for concurrent use.
func (m *Mapper) ResourceStates() []ResourceState {
	list := m.resourceList()
	out := make([]ResourceState, 0, len(list))
	for _, r := range list {
		halted, known := r.servedState()
		out = append(out, ResourceState{Resource: r.name(), Halted: halted, Known: known, Schema: r.schemaState(), Conflicts: m.states.conflictCount(r.name()), Blocked: r.projection.Blocked})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	return out
}
