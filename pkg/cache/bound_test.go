package cache

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
)

// boundRules returns rules at rv without Customizations, in the Bound mode, with the
// LocationBindings "names" of each namespace of the test store's cluster binding the listed
// locations; east and west are registered.
func boundRules(t testing.TB, rv uint64, bound map[string][]string) Rules {
	t.Helper()
	locs := []customization.Location{{Name: "east", Labels: map[string]string{"region": "eu"}}, {Name: "west", Labels: map[string]string{"region": "us"}}}
	s, errs := customization.NewCompiler(customization.Options{PlainCluster: "root"}).Snapshot(rv, nil, locs)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var bindings []*locationbinding.Binding
	for ns, names := range bound {
		bindings = append(bindings, locationbinding.Compile(locationbinding.Key{Cluster: "root", Namespace: ns, Name: "names"},
			&controlv1alpha1.LocationBindingSpec{LocationNames: names}))
	}
	registered := []locationbinding.Location{{Name: "east", Labels: locs[0].Labels}, {Name: "west", Labels: locs[1].Labels}}
	return s.WithBindings(locationbinding.NewIndex(bindings, registered))
}

// TestUnboundLocationsDoNotSeeObjects: in the Bound mode a view shows an object only when the
// object's namespace is bound to the location; the assignment to another location is ignored
// (not in the index, not counted for the location, not a status location of the object).
func TestUnboundLocationsDoNotSeeObjects(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	s.SetRules(boundRules(t, 1, map[string][]string{"tenant-a": {"east"}}), 0)
	mustReplace(t, s, 10,
		cm("tenant-a", "both", 10, locs("east", "west")),
		cm("tenant-a", "west-only", 10, locs("west")),
		cm("tenant-b", "east-only", 10, locs("east")))

	if got := viewNames(t, s, "east"); !slices.Equal(got, []string{"both"}) {
		t.Errorf("east's view: %v, want [both] (tenant-b has no binding)", got)
	}
	if got := viewNames(t, s, "west"); len(got) != 0 {
		t.Errorf("west's view: %v, want nothing (west is bound to no namespace)", got)
	}
	if _, _, ok := s.Get("west", "tenant-a", "both"); ok {
		t.Error("a GET in the view of an unbound location found the object")
	}
	o, _, ok := s.Get("east", "tenant-a", "both")
	if !ok {
		t.Fatal("east's view has no tenant-a/both")
	}
	if got := o.Locations(); !slices.Equal(got, []string{"east"}) {
		t.Errorf("Locations() = %v, want [east]: an unbound assignment is ignored", got)
	}
	if _, ok := s.Locations()["west"]; ok {
		t.Error("the unbound location west is counted in the store's locations")
	}
}

// TestBindingChangesAreWatchEvents: a binding added makes the objects assigned to the location
// ADDED in its watches, a binding removed makes them DELETED (and a resume from before replays
// both), at the fresh resourceVersion of the change.
func TestBindingChangesAreWatchEvents(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	s.SetRules(boundRules(t, 1, map[string][]string{"tenant-a": {"east"}}), 0)
	mustReplace(t, s, 10, cm("tenant-a", "o", 10, locs("east", "west")), cm("tenant-b", "p", 10, locs("west")))
	east := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10})
	west := mustWatch(t, s, "west", WatchOptions{ResourceVersion: 10})

	s.SetRules(boundRules(t, 2, map[string][]string{"tenant-a": {"east", "west"}}), 12)
	expect(t, west, "ADDED o@12")
	expectNothing(t, east)

	s.SetRules(boundRules(t, 3, map[string][]string{"tenant-a": {"east", "west"}, "tenant-b": {"west"}}), 14)
	expect(t, west, "ADDED p@14")

	s.SetRules(boundRules(t, 4, map[string][]string{"tenant-b": {"west"}}), 16)
	expect(t, west, "DELETED o@16")
	expect(t, east, "DELETED o@16")
	if got := viewNames(t, s, "west"); !slices.Equal(got, []string{"p"}) {
		t.Errorf("west's view after tenant-a lost its binding: %v, want [p]", got)
	}
	expect(t, mustWatch(t, s, "west", WatchOptions{ResourceVersion: 10}), "ADDED o@12", "ADDED p@14", "DELETED o@16")

	// Bound again: the object comes back with its assignment, which it never lost.
	s.SetRules(boundRules(t, 5, map[string][]string{"tenant-a": {"east"}, "tenant-b": {"west"}}), 18)
	expect(t, east, "ADDED o@18")
	expectNothing(t, west)
}

// TestClusterScopedObjectsAreBoundByTheControlNamespace: a cluster-scoped object is shown to
// the locations the LocationBindings of cluster-mapper-system bind, and to none without one.
func TestClusterScopedObjectsAreBoundByTheControlNamespace(t *testing.T) {
	s := NewResourceStore(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"},
		schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, false, StoreOptions{DefaultCluster: "root"})
	t.Cleanup(s.Close)
	s.SetRules(boundRules(t, 1, map[string][]string{"tenant-a": {"east", "west"}}), 0)
	w := cm("", "w", 10, locs("east", "west"))
	w.SetAPIVersion("example.com/v1")
	w.SetKind("Widget")
	mustReplace(t, s, 10, w)
	if got := viewNames(t, s, "east"); len(got) != 0 {
		t.Errorf("east's view of a cluster-scoped object without a binding in %s: %v, want nothing", locationbinding.ClusterScopedNamespace, got)
	}
	s.SetRules(boundRules(t, 2, map[string][]string{locationbinding.ClusterScopedNamespace: {"west"}}), 12)
	if got := viewNames(t, s, "west"); !slices.Equal(got, []string{"w"}) {
		t.Errorf("west's view with the binding in %s: %v, want [w]", locationbinding.ClusterScopedNamespace, got)
	}
	if got := viewNames(t, s, "east"); len(got) != 0 {
		t.Errorf("east's view: %v, want nothing", got)
	}
}

// viewNames lists location's view and returns the objects' names.
func viewNames(t testing.TB, s *ResourceStore, location string) []string {
	t.Helper()
	res, err := s.List(location, ListOptions{})
	if err != nil {
		t.Fatalf("List(%s): %v", location, err)
	}
	if len(res.Items) == 0 {
		return nil
	}
	return strings.Split(names(res.Items), ",")
}

// TestUnbindingALocationThatHoldsAFinalizer: the deletion protocol under bindings (bound.go,
// deletion.go). A location whose finalizer an object carries made a copy while it was bound;
// when the binding goes, its view keeps the object, shown deleting (a MODIFIED with a
// deletionTimestamp and the assignment []) and counted as a pending deletion, so that its
// mapper deletes the copy and then removes the finalizer, which ends the object in that view.
// A location bound but without its finalizer (it never made a copy) just loses the object (a
// DELETED), and an unbound location never sees it nor waits for it.
func TestUnbindingALocationThatHoldsAFinalizer(t *testing.T) {
	const created = "2026-01-02T03:04:05Z"
	eastFin := contract.LocationFinalizer("east")
	s := newTestStore(t, StoreOptions{})
	s.SetRules(boundRules(t, 1, map[string][]string{"tenant-a": {"east", "west"}}), 0)
	mustReplace(t, s, 10, cm("tenant-a", "o", 10, locs("east", "west", "north"), "c:"+created, "f:"+eastFin))
	east := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10})
	west := mustWatch(t, s, "west", WatchOptions{ResourceVersion: 10})
	if got := viewNames(t, s, "north"); len(got) != 0 {
		t.Fatalf("north's view: %v, want nothing (north is bound to no namespace)", got)
	}

	s.SetRules(boundRules(t, 2, map[string][]string{"tenant-b": {"east", "west"}}), 12)
	expect(t, west, "DELETED o@12")
	e := nextOrNone(east)
	if e == nil || ev(*e) != "MODIFIED o@12" {
		t.Fatalf("east: %v, want MODIFIED o@12 (shown deleting: east holds its finalizer)", e)
	}
	u := &unstructured.Unstructured{Object: decoded(t, e.Object)}
	if u.GetDeletionTimestamp() == nil || u.GetAnnotations()[contract.AssignedLocationsAnnotation] != "[]" {
		t.Fatalf("east's view after the binding went: deletionTimestamp %v, assignment %q; want set and []",
			u.GetDeletionTimestamp(), u.GetAnnotations()[contract.AssignedLocationsAnnotation])
	}
	if got := s.Locations()["east"].Deleting; got != 1 {
		t.Errorf("east's pending deletions: %d, want 1", got)
	}
	o, _, ok := s.Get("east", "tenant-a", "o")
	if !ok || !o.DeletionPending("east") || o.DeletionPending("west") || o.DeletionPending("north") {
		t.Fatalf("DeletionPending after the binding went: east %v, west %v, north %v; want east only", ok && o.DeletionPending("east"), ok && o.DeletionPending("west"), ok && o.DeletionPending("north"))
	}

	// East's mapper deleted its copy and removed its finalizer: the object leaves east's view.
	mustUpdate(t, s, cm("tenant-a", "o", 13, locs("east", "west", "north"), "c:"+created))
	expect(t, east, "DELETED o@13")
	expectNothing(t, west)
	if got := s.Locations()["east"].Deleting; got != 0 {
		t.Errorf("east's pending deletions after its finalizer went: %d, want 0", got)
	}
}
