package cache

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// shared is a ConfigMap assigned to east and west that reflects status, with the given status
// records ("east" → its record JSON) at rv.
func shared(rv uint64, records map[string]string, extra ...string) *unstructured.Unstructured {
	args := []string{"a:" + contract.StatusPolicyAnnotation + "=" + contract.StatusPolicyReflect}
	for loc, rec := range records {
		args = append(args, "a:"+contract.StatusRecordAnnotationPrefix+loc+"="+rec)
	}
	return cm("ns", "o", rv, locs("east", "west"), append(args, extra...)...)
}

// TestStatusWriteOfAnotherLocationIsNoEvent: a status record written by
// west changes nothing east can see, so east's watches get no event for it, live or resumed
// from the history, and east's view keeps the resourceVersion of the last change it saw; the
// next change east can see is its next event. Fails on main before the fix: east got
// "MODIFIED o@11" for west's record.
func TestStatusWriteOfAnotherLocationIsNoEvent(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 10, shared(10, nil))
	east := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10})
	west := mustWatch(t, s, "west", WatchOptions{ResourceVersion: 10})

	mustUpdate(t, s, shared(11, map[string]string{"west": `{"phase":"w1"}`}))
	mustUpdate(t, s, shared(12, map[string]string{"west": `{"phase":"w2"}`}))
	expect(t, west, "MODIFIED o@11", "MODIFIED o@12")

	// east's view is unchanged: same resourceVersion in Get and List (lists keep the list's RV).
	if o, _, ok := s.Get("east", "ns", "o"); !ok || o.ResourceVersion() != 10 || o.Unstructured().GetResourceVersion() != "10" || o.SourceResourceVersion() != 12 {
		t.Fatalf("east's Get: %+v, want the object at its visible resourceVersion 10 (source 12)", o)
	}
	if res, err := s.List("east", ListOptions{}); err != nil || res.ResourceVersion != 12 || len(res.Items) != 1 || res.Items[0].ResourceVersion() != 10 {
		t.Fatalf("east's List: %+v %v, want list RV 12 with the object at 10", res, err)
	}

	// east's own record is its next event, nothing before it.
	mustUpdate(t, s, shared(13, map[string]string{"west": `{"phase":"w2"}`, "east": `{"phase":"e1"}`}))
	expect(t, east, "MODIFIED o@13")
	if o, _, _ := s.Get("west", "ns", "o"); o.ResourceVersion() != 12 {
		t.Fatalf("west's view is at %d after east's write, want 12", o.ResourceVersion())
	}

	// A change everyone sees is an event for everyone (and west's first since 12: east's
	// record was none).
	mustUpdate(t, s, shared(14, map[string]string{"west": `{"phase":"w2"}`, "east": `{"phase":"e1"}`}, "l:app=x"))
	expect(t, east, "MODIFIED o@14")
	expect(t, west, "MODIFIED o@14")

	// A resume replays the same decisions as the live watch.
	expect(t, mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10}), "MODIFIED o@13", "MODIFIED o@14")
	expect(t, mustWatch(t, s, "west", WatchOptions{ResourceVersion: 10}), "MODIFIED o@11", "MODIFIED o@12", "MODIFIED o@14")
	expect(t, mustWatch(t, s, "east", WatchOptions{ResourceVersion: 11}), "MODIFIED o@13", "MODIFIED o@14")
}

// TestAssignmentOfAnotherLocationIsNoEvent: adding or removing another location changes only
// kcp.io/assigned-locations, which every view shows as ["<itself>"]: no event for east (also a
// side channel otherwise), ADDED/DELETED for the location that gains or loses the object.
func TestAssignmentOfAnotherLocationIsNoEvent(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 10, cm("ns", "o", 10, locs("east", "west")))
	east := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10})
	north := mustWatch(t, s, "north", WatchOptions{ResourceVersion: 10})
	mustUpdate(t, s, cm("ns", "o", 11, locs("east", "north", "west")))
	mustUpdate(t, s, cm("ns", "o", 12, locs("east", "north")))
	mustUpdate(t, s, cm("ns", "o", 13, locs("east"), "l:app=x"))
	expect(t, north, "ADDED o@11", "DELETED o@13")
	expect(t, east, "MODIFIED o@13")
}

// TestViewsUnchangedMatchesRendering checks the shortcuts of viewChanges (only owners of a
// changed annotation are rendered when the common view is unchanged) against rendering and
// comparing every location's view, over random pairs of object versions: which locations see
// a change, and which generation each view shows (the previous one after a change of .status
// alone, VisibleGeneration).
func TestViewsUnchangedMatchesRendering(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	all := []string{"east", "west", "north"}
	pick := func(vals ...string) string { return vals[rng.Intn(len(vals))] }
	random := func(rv uint64) *Object {
		var ls []string
		for _, l := range all {
			if rng.Intn(3) > 0 {
				ls = append(ls, l)
			}
		}
		if len(ls) == 0 {
			ls = []string{"east"}
		}
		var extra []string
		if rng.Intn(2) == 0 {
			extra = append(extra, "a:"+contract.StatusPolicyAnnotation+"="+pick(contract.StatusPolicyReflect, contract.StatusPolicyNone))
		}
		for _, l := range all {
			if rng.Intn(2) == 0 {
				extra = append(extra, "a:"+contract.StatusRecordAnnotationPrefix+l+"="+pick(`{"p":1}`, `{"p":2}`, `bad`))
			}
			if rng.Intn(4) == 0 {
				extra = append(extra, "a:"+contract.SpecDiffAnnotationPrefix+l+"="+pick(`[]`, `[{}]`, `[{"op":"add","path":"/data/x","value":"1"}]`, `[{"op":"add","path":"/data/x","value":"2"}]`))
			}
		}
		if rng.Intn(3) == 0 {
			extra = append(extra, "a:"+contract.StatusLocationAnnotation+"="+pick(append(all, "")...))
		}
		if rng.Intn(3) == 0 {
			extra = append(extra, "a:"+contract.LastAppliedConfigAnnotation+"="+pick("x", "y"))
		}
		if rng.Intn(4) == 0 {
			extra = append(extra, "a:other="+pick("x", "y"))
		}
		if rng.Intn(4) == 0 {
			extra = append(extra, "l:app="+pick("x", "y"))
		}
		if rng.Intn(4) == 0 {
			extra = append(extra, "d:k="+pick("x", "y"))
		}
		// The deletion protocol (deletion.go): locations' finalizers, assigned or not, another
		// controller's, and a deletion at the source at one of two times; the time a view shows
		// is the source's, else the creationTimestamp.
		extra = append(extra, "c:2026-01-02T03:04:05Z")
		for _, l := range all {
			if rng.Intn(3) == 0 {
				extra = append(extra, "f:"+contract.LocationFinalizer(l))
			}
		}
		if rng.Intn(4) == 0 {
			extra = append(extra, "f:example.com/cleanup")
		}
		if rng.Intn(3) == 0 {
			extra = append(extra, "x:"+pick("2026-02-03T04:05:06Z", "2026-02-03T04:05:07Z"))
		}
		// The deletion protocol (deletion.go): locations' finalizers, assigned or not, another
		// controller's, and a deletion at the source at one of two times; the time a view shows
		// is the source's, else the creationTimestamp.
		extra = append(extra, "c:2026-01-02T03:04:05Z")
		for _, l := range all {
			if rng.Intn(3) == 0 {
				extra = append(extra, "f:"+contract.LocationFinalizer(l))
			}
		}
		if rng.Intn(4) == 0 {
			extra = append(extra, "f:example.com/cleanup")
		}
		if rng.Intn(3) == 0 {
			extra = append(extra, "x:"+pick("2026-02-03T04:05:06Z", "2026-02-03T04:05:07Z"))
		}
		u := cm("ns", "o", rv, ls, extra...)
		if rng.Intn(2) == 0 {
			u.Object["status"] = map[string]interface{}{"p": int64(rng.Intn(2))}
		}
		if g := rng.Intn(3); g > 0 {
			u.SetGeneration(int64(g))
		}
		sort.Strings(ls)
		return newObject("root|ns/o", "root", "ns", "o", ls, rv, u)
	}
	// successor is a version after prev with one change, so that most pairs keep the common
	// view and exercise the shortcut for a location's own parts: a location's finalizer added
	// or removed, another controller's, the source's deletion, a location (un)assigned, or
	// the data.
	successor := func(prev *Object) *Object {
		u := prev.u.DeepCopy()
		u.SetResourceVersion("2")
		ls := slices.Clone(prev.assigned)
		switch l := all[rng.Intn(len(all))]; rng.Intn(5) {
		case 0:
			f := contract.LocationFinalizer(l)
			if fs := u.GetFinalizers(); slices.Contains(fs, f) {
				u.SetFinalizers(slices.DeleteFunc(fs, func(x string) bool { return x == f }))
			} else {
				u.SetFinalizers(append(fs, f))
			}
		case 1:
			if fs := u.GetFinalizers(); slices.Contains(fs, "example.com/cleanup") {
				u.SetFinalizers(slices.DeleteFunc(fs, func(x string) bool { return x == "example.com/cleanup" }))
			} else {
				u.SetFinalizers(append(fs, "example.com/cleanup"))
			}
		case 2:
			tm, _ := time.Parse(time.RFC3339, pick("2026-02-03T04:05:06Z", "2026-02-03T04:05:07Z"))
			u.SetDeletionTimestamp(&metav1.Time{Time: tm})
		case 3:
			if slices.Contains(ls, l) && len(ls) > 1 {
				ls = slices.DeleteFunc(ls, func(x string) bool { return x == l })
			} else if !slices.Contains(ls, l) {
				ls = append(ls, l)
			}
			sort.Strings(ls)
			ann := u.GetAnnotations()
			b, _ := json.Marshal(ls)
			ann[contract.AssignedLocationsAnnotation] = string(b)
			u.SetAnnotations(ann)
		default:
			u.Object["data"] = map[string]interface{}{"k": pick("x", "y", "z")}
		}
		return newObject("root|ns/o", "root", "ns", "o", ls, 2, u)
	}
	// rendering is what location's view shows of o: the last rendering that succeeded where o
	// fails (settleRendering), else LocationView.
	rendering := func(o *Object, loc string) *unstructured.Unstructured {
		if lg := o.lastGood[loc]; lg != nil {
			return lg
		}
		return LocationView(o.u, o.assigned, loc)
	}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	ignore := func(string, error) {}
	shortcuts, olderGenerations := 0, 0
	for i := 0; i < 5000; i++ {
		prev := random(1)
		obj := random(2)
		if rng.Intn(2) == 0 {
			obj = successor(prev)
		}
		prev.settleRendering(nil, gvr, 0, nil, nil, ignore)
		obj.settleRendering(nil, gvr, 0, prev, nil, ignore)
		if rng.Intn(2) == 0 {
			for _, l := range prev.locations {
				prev.ForLocation(l) // compared from the cached variant
			}
		}
		setVisibility(prev, obj) // viewChanges, and lastGood locations unchanged
		for _, loc := range obj.locations {
			got := !obj.viewChangedFor(loc)
			want := prev.HasLocation(loc) && sameView(rendering(prev, loc), rendering(obj, loc))
			if got != want {
				t.Fatalf("location %s: unchanged=%v, rendering says %v\nprev %v %v\nobj  %v %v", loc, got, want, prev.locations, prev.u.Object, obj.locations, obj.u.Object)
			}
			wantGen := obj.generation
			if prev.HasLocation(loc) && sameContent(rendering(prev, loc), rendering(obj, loc), true, false) {
				wantGen = prev.generation // unchanged, or changed in .status only
			}
			if g := obj.ViewGeneration(loc); g != wantGen {
				t.Fatalf("location %s: shows generation %d, want %d\nprev %v %v\nobj  %v %v", loc, g, wantGen, prev.locations, prev.u.Object, obj.locations, obj.u.Object)
			}
			if wantGen != obj.generation {
				olderGenerations++
			}
		}
		if sameView(LocationView(prev.u, prev.locations, ""), LocationView(obj.u, obj.locations, "")) {
			shortcuts++
		}
	}
	if shortcuts < 50 {
		t.Fatalf("only %d of the pairs took the shortcut; the test does not exercise it", shortcuts)
	}
	if olderGenerations < 50 {
		t.Fatalf("only %d views kept an older generation; the test does not exercise it", olderGenerations)
	}
}

// TestVisibleResourceVersionAcrossVersions follows the visible resourceVersions of three
// locations through a series of writes, each seen by some of them.
func TestVisibleResourceVersionAcrossVersions(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	three := locs("east", "north", "west")
	obj := func(rv uint64, records map[string]string, extra ...string) *unstructured.Unstructured {
		args := []string{"a:" + contract.StatusPolicyAnnotation + "=" + contract.StatusPolicyReflect}
		for loc, rec := range records {
			args = append(args, "a:"+contract.StatusRecordAnnotationPrefix+loc+"="+rec)
		}
		return cm("ns", "o", rv, three, append(args, extra...)...)
	}
	mustReplace(t, s, 10, obj(10, nil))
	steps := []struct {
		u    *unstructured.Unstructured
		want map[string]uint64
	}{
		{obj(11, map[string]string{"east": "{}"}), map[string]uint64{"east": 11, "north": 10, "west": 10}},
		{obj(12, map[string]string{"east": "{}", "west": "{}"}), map[string]uint64{"east": 11, "north": 10, "west": 12}},
		{obj(13, map[string]string{"east": `{"a":1}`, "west": "{}"}), map[string]uint64{"east": 13, "north": 10, "west": 12}},
		{obj(14, map[string]string{"east": `{"a":1}`, "west": "{}"}, "l:app=x"), map[string]uint64{"east": 14, "north": 14, "west": 14}},
		{obj(15, map[string]string{"east": `{"a":1}`, "west": "{}", "north": "{}"}, "l:app=x"), map[string]uint64{"east": 14, "north": 15, "west": 14}},
	}
	for i, st := range steps {
		mustUpdate(t, s, st.u)
		for loc, want := range st.want {
			o, _, ok := s.Get(loc, "ns", "o")
			if !ok || o.ResourceVersion() != want || o.Unstructured().GetResourceVersion() != strconv.FormatUint(want, 10) {
				t.Fatalf("step %d: %s's view at %v, want %d", i, loc, o, want)
			}
		}
	}
}

// BenchmarkStatusWritesOfManyLocations: 20 locations write their status record on the same 100
// objects (every object assigned to all of them); one round is one write per location and
// object (2,000 source events). It reports the watch events each location's watch receives per
// round: a location sees its own 100 writes (before the fix: all 2,000).
func BenchmarkStatusWritesOfManyLocations(b *testing.B) {
	const nLocations, nObjects = 20, 100
	s := newTestStore(b, StoreOptions{WatcherBufferSize: 1 << 20})
	var all []string
	for i := 0; i < nLocations; i++ {
		all = append(all, fmt.Sprintf("loc-%02d", i))
	}
	records := make([]map[string]string, nObjects)
	build := func(i int, rv uint64) *unstructured.Unstructured {
		extra := []string{"a:" + contract.StatusPolicyAnnotation + "=" + contract.StatusPolicyReflect}
		for loc, rec := range records[i] {
			extra = append(extra, "a:"+contract.StatusRecordAnnotationPrefix+loc+"="+rec)
		}
		return cm("ns", fmt.Sprintf("o-%03d", i), rv, all, extra...)
	}
	rv := uint64(1)
	var initial []*unstructured.Unstructured
	for i := range records {
		records[i] = map[string]string{}
		rv++
		initial = append(initial, build(i, rv))
	}
	mustReplace(b, s, rv, initial...)
	counts := make([]int, nLocations)
	done := make([]chan struct{}, nLocations)
	for l, loc := range all {
		w := mustWatch(b, s, loc, WatchOptions{ResourceVersion: rv})
		done[l] = make(chan struct{})
		go func(l int) {
			for e := range w.ResultChan() {
				if o, ok := e.Object.(*Object); ok && o.Name() == "sentinel" {
					close(done[l])
					return
				}
				counts[l]++
			}
		}(l)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for round := 0; round < b.N; round++ {
		for i := range records {
			for _, loc := range all {
				rv++
				records[i][loc] = fmt.Sprintf(`{"observedRound":%d}`, round)
				mustUpdate(b, s, build(i, rv))
			}
		}
	}
	b.StopTimer()
	rv++
	mustUpdate(b, s, cm("ns", "sentinel", rv, all))
	total := 0
	for l := range all {
		<-done[l]
		total += counts[l]
	}
	b.ReportMetric(float64(total)/float64(nLocations*b.N), "events/location/round")
	b.ReportMetric(float64(nObjects*nLocations), "writes/round")
}

// BenchmarkVisibilityDecision measures deciding which views an event changes for an object
// assigned to 100 locations that each have a status record: a status record write (only the
// writer's view changes) and a spec change (every view changes, all 100 are compared).
func BenchmarkVisibilityDecision(b *testing.B) {
	var all []string
	extra := []string{"a:" + contract.StatusPolicyAnnotation + "=" + contract.StatusPolicyReflect}
	for i := 0; i < 100; i++ {
		all = append(all, fmt.Sprintf("loc-%03d", i))
		extra = append(extra, "a:"+contract.StatusRecordAnnotationPrefix+all[i]+`={"phase":"Ready","replicas":3}`)
	}
	object := func(rv uint64, data string, record string) *Object {
		u := cm("ns", "o", rv, all, append(extra, "a:"+contract.StatusRecordAnnotationPrefix+"loc-000="+record, "d:k="+data)...)
		return newObject("root|ns/o", "root", "ns", "o", all, rv, u)
	}
	for _, c := range []struct {
		name string
		next *Object
	}{
		{"statusRecordWrite", object(2, "x", `{"phase":"Degraded"}`)},
		{"specChange", object(2, "y", `{}`)},
	} {
		b.Run(c.name, func(b *testing.B) {
			prev := object(1, "x", `{}`)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				obj := newObject(c.next.key, c.next.cluster, c.next.namespace, c.next.name, c.next.locations, c.next.rv, c.next.u)
				setVisibility(prev, obj)
			}
		})
	}
}
