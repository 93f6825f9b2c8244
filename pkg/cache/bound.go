package cache

import (
	"slices"

	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
)

// A location's view shows an object only when the object's namespace (with its logical
// cluster) is bound to the location (Rules.Bindings; docs/tenancy.md): an assignment to any
// other location is ignored. The cache drops the unbound locations when it builds an object
// version (boundOnly), so that for the index, the views, the renderings and the status records
// the object is assigned to its bound locations only (Object.Locations); an ignored
// assignment is counted (mapper_apiserver_unbound_assignments_total) and logged at level 2 (a
// tenant decides how often, so it is not logged by default). A change of the bindings is a
// change of the rules: ResourceStore.SetRules builds again the objects of the namespaces whose
// bound locations changed (locationbinding.Index.Changed), and a location that gains an object
// gets an ADDED, one that loses it a DELETED.

// boundOnly returns the locations of locs (an object's parsed assignment, sorted) that are
// bound to the object id under the store's rules: locs itself when every one is (no copy, no
// allocation: one bound-set lookup for the object's namespace, then one per location), a new
// slice otherwise, nil when none is.
func (s *ResourceStore) boundOnly(id identity, locs []string) []string {
	if len(locs) == 0 {
		return locs
	}
	rules := s.rules.load()
	if rules == nil {
		return locs
	}
	bindings := rules.Bindings()
	if bindings == nil {
		return locs
	}
	scope := bindings.Scope(id.cluster, id.namespace)
	if !slices.ContainsFunc(locs, func(l string) bool { return !scope.Binds(l) }) {
		return locs
	}
	var bound []string
	for _, l := range locs {
		if scope.Binds(l) {
			bound = append(bound, l)
		}
	}
	s.metrics.unbound.Inc()
	klog.V(2).InfoS("Ignoring the assignment of an object to locations not bound to its namespace",
		"resource", s.gvr.GroupResource().String(), "object", contract.Truncate(string(id.key), maxLoggedValue),
		"resourceVersion", contract.Truncate(id.rvString, maxLoggedValue), "assigned", len(locs), "bound", len(bound))
	return bound
}

// bindingChanges returns the namespaces whose bound locations differ between the rules old
// and rules (either may be nil: every location bound).
func bindingChanges(rules, old Rules) locationbinding.Changes {
	var now, before *locationbinding.Index
	if rules != nil {
		now = rules.Bindings()
	}
	if old != nil {
		before = old.Bindings()
	}
	return now.Changed(before)
}

// unionSorted returns the sorted union of two sorted lists of names (a or b itself when the
// other adds nothing).
func unionSorted(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}
