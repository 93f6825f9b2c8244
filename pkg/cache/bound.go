package cache

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
// bound to the object id under the store's rules (boundIn), counting and logging an ignored
// assignment.
func (s *ResourceStore) boundOnly(id identity, locs []string) []string {
	bound := boundIn(s.rules.load(), id.cluster, id.namespace, locs)
	if len(bound) == len(locs) {
		return locs
	}
	s.metrics.unbound.Inc()
	klog.V(2).InfoS("Ignoring the assignment of an object to locations not bound to its namespace",
		"resource", s.gvr.GroupResource().String(), "object", contract.Truncate(string(id.key), maxLoggedValue),
		"resourceVersion", contract.Truncate(id.rvString, maxLoggedValue), "assigned", len(locs), "bound", len(bound))
	return bound
}

// boundIn returns the locations of locs (sorted) bound to namespace in cluster under rules
// (nil rules, or rules without bindings: the Open mode, every location bound):
// locationbinding.Scope.Keep, locs itself when every one is.
func boundIn(rules Rules, cluster, namespace string, locs []string) []string {
	if len(locs) == 0 || rules == nil {
		return locs
	}
	return rules.Bindings().Scope(cluster, namespace).Keep(locs)
}

// Assignment returns the locations u, a source object of the store's resource in the logical
// cluster cluster, is assigned to as the views see it (sorted): its kcp.io/assigned-locations
// parsed (none when malformed: docs/design.md, "Names"), or for a related copy its location
// alone (assignedOrRelated), without the locations not bound to its namespace under the
// store's current rules. The writes through a view (status, a
// location's finalizer) check the assignment with it, so that a location writes on an object
// only while its view shows the object assigned to it: a location a namespace is not bound to
// never writes a status record on its objects nor adds its finalizer to them (the deletion
// protocol then never waits for a location that could not hold a copy).
func (s *ResourceStore) Assignment(u *unstructured.Unstructured, cluster string) []string {
	locs, err := contract.ParseLocations(u.GetAnnotations()[contract.AssignedLocationsAnnotation])
	if err != nil {
		locs = nil
	}
	locs = assignedOrRelated(locs, stringLabels(u))
	return boundIn(s.rules.load(), cluster, u.GetNamespace(), locs)
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
