package cache

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// TestDeletionViews follows one object through the deletion protocol (deletion.go), fed to a
// store as the source's bytes and to one as decoded objects, which must agree event for event:
// a location's finalizer shows in its view only and is no event in the others'; a location
// unassigned while its finalizer holds keeps the object, shown with the object's
// creationTimestamp as deletionTimestamp and [] as assignment, and counted as a pending
// deletion; removing the finalizer removes it from the view; a deletion at the source shows in
// no view while another controller's finalizer is left, then in the views of the locations
// holding theirs, with the source's deletionTimestamp; an object unassigned from a location
// that holds it and then deleted at the source moves that view from the creationTimestamp to
// the source's deletionTimestamp. Objects of several locations stay
// templates of the source's bytes (template.go) with their finalizers and resourceVersion holes.
func TestDeletionViews(t *testing.T) {
	const created, deleted = "2026-01-02T03:04:05Z", "2026-02-03T04:05:06Z"
	east, west := contract.LocationFinalizer("east"), contract.LocationFinalizer("west")
	other := "example.com/cleanup"
	s := twinStores{t: t, fromJSON: newTestStore(t, StoreOptions{DefaultCluster: "root"}), fromUs: newTestStore(t, StoreOptions{DefaultCluster: "root"})}
	obj := func(rv uint64, l []string, extra ...string) *unstructured.Unstructured {
		return cm("ns", "p", rv, l, append([]string{"c:" + created}, extra...)...)
	}
	s.replace(10, obj(10, locs("east", "west"), "d:k=1"))
	w := map[string][2]watch.Interface{}
	for _, loc := range []string{"east", "west", "north"} {
		w[loc] = [2]watch.Interface{mustWatch(t, s.fromJSON, loc, WatchOptions{}), mustWatch(t, s.fromUs, loc, WatchOptions{})}
	}
	// next returns the next event of loc's watches (both stores agree), "" when none comes.
	next := func(loc string) (string, *unstructured.Unstructured) {
		t.Helper()
		a, b := nextOrNone(w[loc][0]), nextOrNone(w[loc][1])
		switch {
		case a == nil && b == nil:
			return "", nil
		case a == nil || b == nil:
			t.Fatalf("%s: events differ: from bytes %v, decoded %v", loc, a, b)
		}
		if ev(*a) != ev(*b) || !reflect.DeepEqual(decoded(t, a.Object), decoded(t, b.Object)) {
			t.Fatalf("%s: from bytes %s %v\ndecoded %s %v", loc, ev(*a), decoded(t, a.Object), ev(*b), decoded(t, b.Object))
		}
		return ev(*a), &unstructured.Unstructured{Object: decoded(t, a.Object)}
	}
	expect := func(loc, want string) *unstructured.Unstructured {
		t.Helper()
		got, u := next(loc)
		if got != want {
			t.Fatalf("%s: event %q, want %q", loc, got, want)
		}
		return u
	}
	template := func(what string, finalizersHole bool) {
		t.Helper()
		o := s.fromJSON.objects[contract.NewKey("root", "ns", "p")]
		if o.hole.end == 0 || o.u != nil || (o.more != nil && o.more.finalizers.end > 0) != finalizersHole {
			t.Fatalf("%s: not kept as a template of its JSON with the finalizers hole %v (hole %v, more %+v, tree %v)", what, finalizersHole, o.hole, o.more, o.u != nil)
		}
	}

	// East adds its finalizer: its view shows it, west's does not change.
	s.update(obj(11, locs("east", "west"), "d:k=1", "f:"+east))
	if u := expect("east", "MODIFIED p@11"); !reflect.DeepEqual(u.GetFinalizers(), []string{east}) {
		t.Fatalf("east's finalizers %v", u.GetFinalizers())
	}
	expect("west", "")
	template("east's finalizer", true)
	// West adds its own, next to another controller's: each view shows its own only.
	s.update(obj(12, locs("east", "west"), "d:k=1", "f:"+east, "f:"+other, "f:"+west))
	if u := expect("west", "MODIFIED p@12"); !reflect.DeepEqual(u.GetFinalizers(), []string{other, west}) {
		t.Fatalf("west's finalizers %v", u.GetFinalizers())
	}
	if u := expect("east", "MODIFIED p@12"); !reflect.DeepEqual(u.GetFinalizers(), []string{east, other}) {
		t.Fatalf("east's finalizers %v", u.GetFinalizers())
	}
	template("both finalizers", true)
	s.update(obj(13, locs("east", "west"), "d:k=1", "f:"+east, "f:"+west))
	expect("east", "MODIFIED p@13")
	expect("west", "MODIFIED p@13")
	// West's finalizer goes and comes back (not something a mapper does; a person could): east
	// sees nothing, and the views are templates with a resourceVersion hole.
	s.update(obj(14, locs("east", "west"), "d:k=1", "f:"+east))
	expect("west", "MODIFIED p@14")
	s.update(obj(15, locs("east", "west"), "d:k=1", "f:"+east, "f:"+west))
	expect("west", "MODIFIED p@15")
	expect("east", "")
	template("after west's changes", true)
	if o, _, _ := s.fromJSON.Get("east", "ns", "p"); o.ResourceVersion() != 13 {
		t.Fatalf("east's view at %d, want 13", o.ResourceVersion())
	}
	// A change every view sees.
	s.update(obj(16, locs("east", "west"), "d:k=2", "f:"+east, "f:"+west))
	expect("east", "MODIFIED p@16")
	expect("west", "MODIFIED p@16")

	// East is unassigned: its view keeps the object, deleting it; west sees nothing.
	s.update(obj(17, locs("west"), "d:k=2", "f:"+east, "f:"+west))
	u := expect("east", "MODIFIED p@17")
	if dt := u.GetDeletionTimestamp(); dt == nil || dt.UTC().Format("2006-01-02T15:04:05Z") != created {
		t.Fatalf("east's deletionTimestamp %v, want the creationTimestamp %s", dt, created)
	}
	if got := u.GetAnnotations()[contract.AssignedLocationsAnnotation]; got != "[]" {
		t.Fatalf("east's assignment %q, want []", got)
	}
	expect("west", "")
	// West's view changes while east's does not: east's view object is shared with the version
	// before, and still says the deletion is pending.
	s.update(obj(18, locs("west"), "d:k=2", "f:"+east, "f:"+west, `a:status.kcp.io/west={"phase":"Up"}`))
	expect("west", "MODIFIED p@18")
	expect("east", "")
	for _, st := range []*ResourceStore{s.fromJSON, s.fromUs} {
		if o, _, ok := st.GetInCluster("east", "root", "ns", "p"); !ok || !o.DeletionPending("east") {
			t.Fatalf("east's view object does not say the deletion is pending: %v", o)
		}
		if got := st.Locations()["east"]; got.Objects != 1 || got.Deleting != 1 {
			t.Fatalf("east's stats %+v, want 1 object, 1 deleting", got)
		}
		if got := st.Locations()["west"]; got.Deleting != 0 {
			t.Fatalf("west's stats %+v, want none deleting", got)
		}
	}
	// East removes its finalizer: the object leaves its view.
	s.update(obj(19, locs("west"), "d:k=2", "f:"+west, `a:status.kcp.io/west={"phase":"Up"}`))
	expect("east", "DELETED p@19")
	expect("west", "")
	if got := s.fromJSON.Locations()["east"]; got.Objects != 0 || got.Deleting != 0 {
		t.Fatalf("east's stats after the release %+v", got)
	}

	// Deleted at the source while another controller's finalizer is left: no view shows it.
	s.update(obj(20, locs("west"), "d:k=2", "f:"+other, "f:"+west, "x:"+deleted))
	if u := expect("west", "MODIFIED p@20"); u.GetDeletionTimestamp() != nil {
		t.Fatalf("west shows a deletion while %s is left: %v", other, u.GetDeletionTimestamp())
	}
	s.update(obj(21, locs("west"), "d:k=2", "f:"+west, "x:"+deleted))
	u = expect("west", "MODIFIED p@21")
	for _, st := range []*ResourceStore{s.fromJSON, s.fromUs} {
		// What a reader of the view sees (a view object, possibly shared with the version
		// before) says so too.
		if o, _, ok := st.GetInCluster("west", "root", "ns", "p"); !ok || !o.DeletionPending("west") {
			t.Fatalf("west's view object does not say the deletion is pending: %v", o)
		}
	}
	if dt := u.GetDeletionTimestamp(); dt == nil || dt.UTC().Format("2006-01-02T15:04:05Z") != deleted {
		t.Fatalf("west's deletionTimestamp %v, want the source's %s", dt, deleted)
	}
	s.delete(obj(22, locs("west"), "d:k=2", "x:"+deleted))
	expect("west", "DELETED p@22")
	expect("north", "")
	expect("east", "")

	// Unassigned from east while east's finalizer holds it, then deleted at the source before
	// east released it: east's view moves from the creationTimestamp to the source's
	// deletionTimestamp, a change of its view (were it none, east's mapper would keep a view
	// object whose time the view no longer shows, and its finalizer removal, compared with the
	// view, would be refused as a change of metadata.deletionTimestamp: TestMapper's ten
	// SIGKILLs found that).
	q := func(rv uint64, l []string, extra ...string) *unstructured.Unstructured {
		return cm("ns", "q", rv, l, append([]string{"c:" + created, "d:k=1"}, extra...)...)
	}
	s.update(q(23, locs("east", "west"), "f:"+east, "f:"+west))
	expect("east", "ADDED q@23")
	expect("west", "ADDED q@23")
	s.update(q(24, locs("west"), "f:"+east, "f:"+west))
	if u := expect("east", "MODIFIED q@24"); u.GetDeletionTimestamp() == nil || u.GetDeletionTimestamp().UTC().Format("2006-01-02T15:04:05Z") != created {
		t.Fatalf("east's deletionTimestamp %v after the unassignment, want the creationTimestamp %s", u.GetDeletionTimestamp(), created)
	}
	expect("west", "")
	s.update(q(25, locs("west"), "f:"+east, "f:"+west, "x:"+deleted))
	if u := expect("east", "MODIFIED q@25"); u.GetDeletionTimestamp() == nil || u.GetDeletionTimestamp().UTC().Format("2006-01-02T15:04:05Z") != deleted {
		t.Fatalf("east's deletionTimestamp %v after the source's deletion, want the source's %s", u.GetDeletionTimestamp(), deleted)
	}
	expect("west", "MODIFIED q@25")
	for _, st := range []*ResourceStore{s.fromJSON, s.fromUs} {
		if o, _, ok := st.GetInCluster("east", "root", "ns", "q"); !ok || o.ResourceVersion() != 25 {
			t.Fatalf("east's view object of q: %v, want it at 25", o)
		}
	}
	s.update(q(26, locs("west"), "f:"+west, "x:"+deleted))
	expect("east", "DELETED q@26")
	expect("west", "")
	s.delete(q(27, locs("west"), "x:"+deleted))
	expect("west", "DELETED q@27")
	expect("north", "")
}

// TestDeletionMarks checks which locations see what of the deletion protocol (deletion.go).
func TestDeletionMarks(t *testing.T) {
	m := marksOf([]string{contract.LocationFinalizer("west"), "x/y", contract.LocationFinalizer("east"), contract.LocationFinalizer("east")}, nil)
	if !reflect.DeepEqual(m.finalized, []string{"east", "west"}) || !m.others {
		t.Fatalf("marks %+v", m)
	}
	if got := m.viewLocations(locs("east", "north"), locs("north")); !reflect.DeepEqual(got, []string{"north", "west"}) {
		t.Fatalf("viewLocations %v: a withheld assigned location stays withheld, an unassigned finalized one is added", got)
	}
	if m.deletionShown(locs("east", "west"), "east") || !m.deletionShown(locs("west"), "east") || m.deletionShown(locs("west"), "north") {
		t.Fatal("deletionShown without a source deletion")
	}
	m.deleting = true
	if m.deletionShown(locs("east", "west"), "east") {
		t.Fatal("a deletion is shown while another controller's finalizer is left")
	}
	m.others = false
	if !m.deletionShown(locs("east", "west"), "east") || m.deletionShown(locs("east", "west"), "north") {
		t.Fatal("deletionShown with only location finalizers left")
	}
	if marksOf(nil, nil) != nil {
		t.Fatal("an object without finalizers has marks")
	}
}
