package cache

import (
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// patched is a ConfigMap assigned to east and west with data.replicas=10 and the given
// per-location patches ("east" → its spec-diff.kcp.io/east value).
func patched(name string, rv uint64, patches map[string]string) *unstructured.Unstructured {
	extra := []string{"d:replicas=10"}
	for loc, p := range patches {
		extra = append(extra, "a:"+contract.SpecDiffAnnotation(loc)+"="+p)
	}
	return cm("ns", name, rv, locs("east", "west"), extra...)
}

const (
	east4 = `[{"op":"replace","path":"/data/replicas","value":"4"}]`
	east5 = `[{"op":"replace","path":"/data/replicas","value":"5"}]`
	west6 = `[{"op":"replace","path":"/data/replicas","value":"6"}]`
	// broken fails on the object: its test operation does not hold.
	broken = `[{"op":"test","path":"/data/replicas","value":"99"},{"op":"replace","path":"/data/replicas","value":"1"}]`
)

// replicasIn returns data.replicas of location's view of ns/name, and whether the view shows
// any spec-diff.kcp.io/ annotation.
func replicasIn(t *testing.T, s *ResourceStore, location, name string) (string, bool) {
	t.Helper()
	o, _, ok := s.Get(location, "ns", name)
	if !ok {
		t.Fatalf("%s's view has no %s", location, name)
	}
	r, _, _ := unstructured.NestedString(o.Unstructured().Object, "data", "replicas")
	for k := range o.Unstructured().GetAnnotations() {
		if strings.HasPrefix(k, contract.SpecDiffAnnotationPrefix) {
			return r, true
		}
	}
	return r, false
}

// TestViewAppliesItsSpecDiff: docs/design.md, "Per object, spec-diff.kcp.io/<location> is applied by
// that location's view": each location sees its own patch applied and no patch annotation; a
// location without a patch sees the object as it is.
func TestViewAppliesItsSpecDiff(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 10, patched("o", 10, map[string]string{"east": east4}))
	if r, shown := replicasIn(t, s, "east", "o"); r != "4" || shown {
		t.Errorf("east's view: replicas %q, patch annotation shown %v; want 4 and no annotation", r, shown)
	}
	if r, shown := replicasIn(t, s, "west", "o"); r != "10" || shown {
		t.Errorf("west's view: replicas %q, patch annotation shown %v; want 10 and no annotation", r, shown)
	}
	res, err := s.List("east", ListOptions{})
	if err != nil || len(res.Items) != 1 {
		t.Fatalf("east's List: %+v %v", res, err)
	}
	if r, _, _ := unstructured.NestedString(res.Items[0].Unstructured().Object, "data", "replicas"); r != "4" {
		t.Errorf("east's List shows replicas %q, want 4", r)
	}

	// A change of east's patch is an event for east only.
	east := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10})
	west := mustWatch(t, s, "west", WatchOptions{ResourceVersion: 10})
	mustUpdate(t, s, patched("o", 11, map[string]string{"east": east5}))
	expect(t, east, "MODIFIED o@11")
	expectNothing(t, west)
	if r, _ := replicasIn(t, s, "east", "o"); r != "5" {
		t.Errorf("east's view after the new patch: replicas %q, want 5", r)
	}
}

// TestFailedSpecDiffKeepsLastRendering: a patch that stops applying never
// removes the object from the view: the location keeps the last version that rendered, with no
// event and its visible resourceVersion unchanged, while other locations follow; fixing the
// patch is the next event. Fails without render.go: east's view showed the failed version
// unpatched (replicas 10) with a MODIFIED event.
func TestFailedSpecDiffKeepsLastRendering(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 10, patched("o", 10, map[string]string{"east": east4, "west": west6}))
	east := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10})
	west := mustWatch(t, s, "west", WatchOptions{ResourceVersion: 10})

	// The source changes the object and east's patch breaks in the same write.
	u := patched("o", 11, map[string]string{"east": broken, "west": west6})
	u.Object["data"].(map[string]interface{})["replicas"] = "12"
	mustUpdate(t, s, u)
	expect(t, west, "MODIFIED o@11")
	expectNothing(t, east)
	o, _, ok := s.Get("east", "ns", "o")
	if !ok {
		t.Fatal("east's view lost the object when its patch failed")
	}
	if r, _, _ := unstructured.NestedString(o.Unstructured().Object, "data", "replicas"); r != "4" || o.ResourceVersion() != 10 {
		t.Errorf("east's view: replicas %q at %d, want the last rendering (4 at 10)", r, o.ResourceVersion())
	}
	if err := s.WithheldError("east", "", "ns", "o"); err != nil {
		t.Errorf("an object still shown is reported withheld: %v", err)
	}

	// Another failing version: still the last good rendering.
	u = patched("o", 12, map[string]string{"east": broken, "west": west6})
	u.SetLabels(map[string]string{"v": "12"})
	mustUpdate(t, s, u)
	expect(t, west, "MODIFIED o@12")
	expectNothing(t, east)
	if r, _ := replicasIn(t, s, "east", "o"); r != "4" {
		t.Errorf("east's view after a second failing version: replicas %q, want 4", r)
	}

	// The fix is east's next event, at the fixing version.
	mustUpdate(t, s, patched("o", 13, map[string]string{"east": east5, "west": west6}))
	expect(t, east, "MODIFIED o@13")
	if r, _ := replicasIn(t, s, "east", "o"); r != "5" {
		t.Errorf("east's view after the fix: replicas %q, want 5", r)
	}
	// A resume from before the failure replays exactly what the live watch got.
	resumed := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10})
	expect(t, resumed, "MODIFIED o@13")
}

// TestNeverRenderedIsWithheld: a new object whose patch fails for a location
// is withheld from that location's view: no ADDED, not listed, and a GET answers 503 (not 404,
// which a mapper would take as "gone" and delete its copy after a restart of the server); other
// locations see it. When the patch is fixed it is ADDED; deleting a withheld object is no
// DELETED for the location that never saw it.
func TestNeverRenderedIsWithheld(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 10)
	east := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10})
	west := mustWatch(t, s, "west", WatchOptions{ResourceVersion: 10})

	mustAdd(t, s, patched("o", 11, map[string]string{"east": broken}))
	expect(t, west, "ADDED o@11")
	expectNothing(t, east)
	if _, _, ok := s.Get("east", "ns", "o"); ok {
		t.Error("east's view shows an object that never rendered for it")
	}
	if res, err := s.List("east", ListOptions{}); err != nil || len(res.Items) != 0 {
		t.Errorf("east's List: %d items (err %v), want none", len(res.Items), err)
	}
	err := s.WithheldError("east", "", "ns", "o")
	if !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("WithheldError = %v, want a 503", err)
	}
	if err := s.WithheldError("west", "", "ns", "o"); err != nil {
		t.Errorf("west is told the object is withheld: %v", err)
	}
	if st := s.Locations()["east"]; st.Objects != 0 {
		t.Errorf("east counts %d objects, want 0", st.Objects)
	}

	mustUpdate(t, s, patched("o", 12, map[string]string{"east": east4}))
	expect(t, east, "ADDED o@12")
	if r, _ := replicasIn(t, s, "east", "o"); r != "4" {
		t.Errorf("east's view after the fix: replicas %q, want 4", r)
	}
	if err := s.WithheldError("east", "", "ns", "o"); err != nil {
		t.Errorf("still withheld after the fix: %v", err)
	}

	mustAdd(t, s, patched("p", 13, map[string]string{"east": broken}))
	expect(t, west, "ADDED p@13")
	mustDelete(t, s, patched("p", 14, map[string]string{"east": broken}))
	expect(t, west, "DELETED p@14")
	expectNothing(t, east)
	if err := s.WithheldError("east", "", "ns", "p"); err != nil {
		t.Errorf("a deleted object is still reported withheld: %v", err)
	}
}

// BenchmarkForLocation: the cost of building one location's copy of an object assigned to
// three locations (what the first LIST or the first watch event of a location pays per
// object), without and with a patch for that location.
func BenchmarkForLocation(b *testing.B) {
	data := map[string]interface{}{}
	for i := 0; i < 20; i++ {
		data["key-"+strconv.Itoa(i)] = strings.Repeat("v", 60)
	}
	for _, c := range []struct {
		name  string
		patch string
	}{{"no patch", ""}, {"own patch", east4}} {
		b.Run(c.name, func(b *testing.B) {
			extra := []string{"l:app=web"}
			if c.patch != "" {
				extra = append(extra, "a:"+contract.SpecDiffAnnotation("east")+"="+c.patch)
			}
			u := cm("ns", "o", 10, locs("east", "north", "west"), extra...)
			u.Object["data"] = data
			data["replicas"] = "10"
			s := newTestStore(b, StoreOptions{})
			mustReplace(b, s, 10, u)
			o := s.objects[contract.NewKey(s.opts.DefaultCluster, "ns", "o")]
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				o.variants.m = nil // build the copy again
				_ = o.ForLocation("east")
			}
		})
	}
}

// TestClosedStoreWithholdsEveryObject: once a store is closed (the resource left the source, or
// the server is shutting down), an object its Get misses is withheld with a 503, not absent: a
// GET that found the store open must not answer 404, which a mapper takes for "gone".
func TestClosedStoreWithholdsEveryObject(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 10, cm("ns", "o", 5, locs("east")))
	if err := s.WithheldError("east", "", "ns", "missing"); err != nil {
		t.Fatalf("an open store withholds a missing object: %v", err)
	}
	s.Close()
	if _, _, ok := s.Get("east", "ns", "o"); ok {
		t.Fatal("a closed store still shows o")
	}
	if err := s.WithheldError("east", "", "ns", "o"); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("WithheldError on a closed store = %v, want a 503", err)
	}
}
