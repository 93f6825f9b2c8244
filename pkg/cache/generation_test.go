package cache

import (
	"bytes"
	"reflect"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// deployment is a Deployment-like object assigned to east, north and west that reflects status,
// at rv with metadata.generation generation, spec.replicas replicas, the given status records
// ("east" → its record JSON) and extra annotations ("key=value"). kube-apiserver bumps a
// Deployment's generation on every change of its annotations, so a status record written by a
// location comes with a generation bump (k8s.io/kubernetes
// pkg/registry/apps/deployment/strategy.go).
func deployment(rv uint64, generation, replicas int64, records map[string]string, extra ...string) *unstructured.Unstructured {
	return deploymentWith(true, rv, generation, replicas, records, extra...)
}

// deploymentWith is deployment, reflecting status only when reflect is set. Without it (and
// without records) the object is a template object (template.go): its views are made from its
// JSON when read, not when it is stored.
func deploymentWith(reflect bool, rv uint64, generation, replicas int64, records map[string]string, extra ...string) *unstructured.Unstructured {
	var args []string
	if reflect {
		args = append(args, "a:"+contract.StatusPolicyAnnotation+"="+contract.StatusPolicyReflect)
	}
	for loc, rec := range records {
		args = append(args, "a:"+contract.StatusRecordAnnotationPrefix+loc+"="+rec)
	}
	for _, e := range extra {
		args = append(args, "a:"+e)
	}
	u := cm("ns", "d", rv, locs("east", "north", "west"), args...)
	u.SetAPIVersion("apps/v1")
	u.SetKind("Deployment")
	u.SetGeneration(generation)
	u.Object["spec"] = map[string]interface{}{"replicas": replicas}
	return u
}

// viewJSON returns the JSON of the one object location's LIST shows, and checks the list holds
// exactly one object.
func viewJSON(t *testing.T, s *ResourceStore, location string) []byte {
	t.Helper()
	res, err := s.List(location, ListOptions{})
	if err != nil || len(res.Items) != 1 {
		t.Fatalf("%s's List: %+v %v, want one object", location, res, err)
	}
	raw, err := res.Items[0].MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), raw...)
}

// decodeView returns raw (a view's JSON) decoded.
func decodeView(t *testing.T, raw []byte) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	return u
}

// expectView checks that location's view (LIST) shows resourceVersion rv and generation
// generation, that the Object a GET returns says so too (ViewGeneration: the status path
// answers with it), and returns its JSON.
func expectView(t *testing.T, s *ResourceStore, location, rv string, generation int64) []byte {
	t.Helper()
	raw := viewJSON(t, s, location)
	if u := decodeView(t, raw); u.GetResourceVersion() != rv || u.GetGeneration() != generation {
		t.Fatalf("%s's view shows resourceVersion %s, generation %d; want %s, %d\n%s", location, u.GetResourceVersion(), u.GetGeneration(), rv, generation, raw)
	}
	for _, o := range s.objects {
		v := o.ForLocation(location)
		if g := v.ViewGeneration(location); g != generation {
			t.Fatalf("%s's view Object says generation %d, its JSON %d", location, g, generation)
		}
	}
	return raw
}

// TestStatusRecordWithGenerationBumpIsNoEventElsewhere: on a Deployment
// every status record written bumps metadata.generation, which every view shows. A view shows
// the generation of its last visible change outside .status, so a location's record (and the
// bump it brings) is an event in its own view only, which shows the new status at the
// generation it showed before (as kube-apiserver keeps the generation across status writes);
// the other views keep showing the same bytes, resourceVersion and generation included,
// whether they are shared from the previous version's view or rendered anew (north lists for
// the first time after the writes; without the Reflect policy version 10 is a template object
// whose views are made when read, so north's view is rendered from version 11 and must show
// version 10's generation). A spec change (with its generation bump) reaches every view.
// Fails without the generation rule: every write was a MODIFIED in all three views; without
// VisibleGeneration in the rendering (comparisons alone), north's view showed generation 2 at
// resourceVersion 10; and without the rule for .status, west's own write moved its view's
// generation to 2 (so a mapper reporting the generation it observed would never catch up).
func TestStatusRecordWithGenerationBumpIsNoEventElsewhere(t *testing.T) {
	for _, reflect := range []bool{true, false} {
		t.Run(map[bool]string{true: "reflect", false: "template"}[reflect], func(t *testing.T) {
			testStatusRecordWithGenerationBump(t, func(rv uint64, generation, replicas int64, records map[string]string) *unstructured.Unstructured {
				return deploymentWith(reflect, rv, generation, replicas, records)
			})
		})
	}
}

// testStatusRecordWithGenerationBump runs TestStatusRecordWithGenerationBumpIsNoEventElsewhere
// with deployment building the object's versions.
func testStatusRecordWithGenerationBump(t *testing.T, deployment func(rv uint64, generation, replicas int64, records map[string]string) *unstructured.Unstructured) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 10, deployment(10, 1, 3, nil))
	// What north saw at 10, from a store that holds version 10 only: north's view below is
	// rendered from later versions (no view of north was made before), and must equal it.
	ref := newTestStore(t, StoreOptions{})
	mustReplace(t, ref, 10, deployment(10, 1, 3, nil))
	north10 := expectView(t, ref, "north", "10", 1)

	east, north, west := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10}),
		mustWatch(t, s, "north", WatchOptions{ResourceVersion: 10}), mustWatch(t, s, "west", WatchOptions{ResourceVersion: 10})
	east10 := expectView(t, s, "east", "10", 1)

	// west writes its status: generation 1 → 2. Only west's view changes, in .status: it keeps
	// generation 1.
	mustUpdate(t, s, deployment(11, 2, 3, map[string]string{"west": `{"replicas":3}`}))
	expect(t, east)
	expect(t, north)
	e := next(t, west)
	if got := ev(e); got != "MODIFIED d@11" {
		t.Fatalf("west's event %s, want MODIFIED d@11", got)
	}
	wu := e.Object.(*Object).Unstructured()
	if wu.GetGeneration() != 1 || !equality.Semantic.DeepEqual(wu.Object["status"], map[string]interface{}{"replicas": int64(3)}) {
		t.Fatalf("west's event shows generation %d, status %v; want 1 and its record", wu.GetGeneration(), wu.Object["status"])
	}
	expectNothing(t, west)
	if got := expectView(t, s, "east", "10", 1); !bytes.Equal(got, east10) {
		t.Fatalf("east's view changed:\n got %s\nwant %s", got, east10)
	}
	if got := expectView(t, s, "north", "10", 1); !bytes.Equal(got, north10) {
		t.Fatalf("north's view (rendered from version 11) is not what it showed at 10:\n got %s\nwant %s", got, north10)
	}
	west11 := expectView(t, s, "west", "11", 1)

	// east writes: generation 2 → 3. Only east's view changes (generation 1 still); west keeps
	// 11, north 10 (both generation 1).
	mustUpdate(t, s, deployment(12, 3, 3, map[string]string{"west": `{"replicas":3}`, "east": `{"replicas":1}`}))
	expect(t, east, "MODIFIED d@12")
	expect(t, north)
	expect(t, west)
	expectView(t, s, "east", "12", 1)
	if got := expectView(t, s, "west", "11", 1); !bytes.Equal(got, west11) {
		t.Fatalf("west's view changed:\n got %s\nwant %s", got, west11)
	}
	if got := expectView(t, s, "north", "10", 1); !bytes.Equal(got, north10) {
		t.Fatalf("north's view changed:\n got %s\nwant %s", got, north10)
	}
	if o, _, _ := s.Get("north", "ns", "d"); o.ResourceVersion() != 10 || o.Unstructured().GetGeneration() != 1 {
		t.Fatalf("north's Get at %d, generation %d; want 10, 1", o.ResourceVersion(), o.Unstructured().GetGeneration())
	}

	// A spec change (and its generation bump) is a change of every view, with the new
	// generation.
	mustUpdate(t, s, deployment(13, 4, 5, map[string]string{"west": `{"replicas":3}`, "east": `{"replicas":1}`}))
	expect(t, east, "MODIFIED d@13")
	expect(t, north, "MODIFIED d@13")
	expect(t, west, "MODIFIED d@13")
	for _, loc := range []string{"east", "north", "west"} {
		u := decodeView(t, expectView(t, s, loc, "13", 4))
		if r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); r != 5 {
			t.Fatalf("%s's view shows spec.replicas %d, want 5", loc, r)
		}
	}

	// A resume replays the same decisions.
	expect(t, mustWatch(t, s, "north", WatchOptions{ResourceVersion: 10}), "MODIFIED d@13")
	expect(t, mustWatch(t, s, "west", WatchOptions{ResourceVersion: 10}), "MODIFIED d@11", "MODIFIED d@13")
}

// TestLastRenderingKeepsVisibleGeneration: a location whose patch stops applying keeps showing
// its last rendering (render.go); when other locations' records moved the generation since its
// last visible change, that rendering shows the generation it showed then, not the one of the
// version it was taken from. Fails without the generation rule (north saw west's record as a
// change, and its kept rendering showed generation 2).
func TestLastRenderingKeepsVisibleGeneration(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 10, deployment(10, 1, 3, nil))
	north := mustWatch(t, s, "north", WatchOptions{ResourceVersion: 10})
	north10 := expectView(t, s, "north", "10", 1)

	mustUpdate(t, s, deployment(11, 2, 3, map[string]string{"west": `{"replicas":3}`}))
	// west writes again, and north's patch is broken in the same version: north keeps its
	// last rendering (taken from version 11, whose generation is 2).
	mustUpdate(t, s, deployment(12, 3, 3, map[string]string{"west": `{"replicas":2}`}, contract.SpecDiffAnnotationPrefix+"north=not a patch"))
	expect(t, north)
	if got := expectView(t, s, "north", "10", 1); !bytes.Equal(got, north10) {
		t.Fatalf("north's kept rendering is not what it showed:\n got %s\nwant %s", got, north10)
	}
	if failures := s.RenderFailures(); len(failures) != 1 || failures[0].Location != "north" || failures[0].Withheld {
		t.Fatalf("render failures %+v, want north's, keeping its last rendering", failures)
	}
}

// TestVisibleGenerationAcrossVersions follows VisibleGeneration through a series of versions,
// each bumping the generation: status records move no view's generation, the writer's
// included; a spec change moves every view's.
func TestVisibleGenerationAcrossVersions(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 10, deployment(10, 1, 3, nil))
	steps := []struct {
		u    *unstructured.Unstructured
		want map[string]int64 // location → generation its view shows
	}{
		{deployment(11, 2, 3, map[string]string{"east": `{"r":1}`}), map[string]int64{"east": 1, "north": 1, "west": 1}},
		{deployment(12, 3, 3, map[string]string{"east": `{"r":1}`, "west": `{"r":2}`}), map[string]int64{"east": 1, "north": 1, "west": 1}},
		{deployment(13, 4, 4, map[string]string{"east": `{"r":1}`, "west": `{"r":2}`}), map[string]int64{"east": 4, "north": 4, "west": 4}},
		{deployment(14, 5, 4, map[string]string{"east": `{"r":1}`, "west": `{"r":2}`, "north": `{"r":3}`}), map[string]int64{"east": 4, "north": 4, "west": 4}},
		{deployment(15, 6, 5, map[string]string{"east": `{"r":1}`, "west": `{"r":2}`, "north": `{"r":3}`}), map[string]int64{"east": 6, "north": 6, "west": 6}},
		{deployment(16, 7, 5, map[string]string{"east": `{"r":4}`, "west": `{"r":2}`, "north": `{"r":3}`}), map[string]int64{"east": 6, "north": 6, "west": 6}},
	}
	for i, st := range steps {
		mustUpdate(t, s, st.u)
		var got []string
		for loc, want := range st.want {
			o, _, ok := s.Get(loc, "ns", "d")
			if !ok || o.Unstructured().GetGeneration() != want {
				got = append(got, loc)
			}
		}
		sort.Strings(got)
		if len(got) > 0 {
			t.Fatalf("step %d: wrong generation in the views of %v, want %v", i, got, st.want)
		}
	}
	obj := s.objects["root|ns/d"]
	if g, older := obj.VisibleGeneration("east"); !older || g != 6 || obj.VisibleResourceVersion("east") != 16 {
		t.Fatalf("east's VisibleGeneration: %d %v at resourceVersion %d, want 6 true at 16 (its own status write)", g, older, obj.VisibleResourceVersion("east"))
	}
	if g, older := obj.VisibleGeneration("north"); !older || g != 6 || obj.VisibleResourceVersion("north") != 15 {
		t.Fatalf("north's VisibleGeneration: %d %v at resourceVersion %d, want 6 true at 15", g, older, obj.VisibleResourceVersion("north"))
	}
}

// TestRerenderKeepsVisibleGeneration: a Customization change that fails for every location
// keeps each view's last rendering byte for byte, generation included, also for a location
// whose view is behind the object (west did not see east's status record, which bumped the
// generation); a change that renders again shows west the object's own generation.
func TestRerenderKeepsVisibleGeneration(t *testing.T) {
	c := customization.NewCompiler(customization.Options{PlainCluster: "root"})
	s := newTestStore(t, StoreOptions{})
	s.SetRules(rules(t, c, 1, "us", regionRule("")), 0)
	dep := func(rv uint64, generation int64, records map[string]string) *unstructured.Unstructured {
		args := []string{"a:" + contract.StatusPolicyAnnotation + "=" + contract.StatusPolicyReflect, "d:replicas=1"}
		for loc, rec := range records {
			args = append(args, "a:"+contract.StatusRecordAnnotationPrefix+loc+"="+rec)
		}
		u := cm("ns", "d", rv, locs("east", "west"), args...)
		u.SetGeneration(generation)
		return u
	}
	mustReplace(t, s, 10, dep(10, 1, nil))
	mustUpdate(t, s, dep(11, 2, map[string]string{"east": `{"phase":"Up"}`}))
	before := viewJSON(t, s, "west")
	o, _, _ := s.Get("west", "ns", "d")
	if g := o.Unstructured().GetGeneration(); o.ResourceVersion() != 10 || g != 1 {
		t.Fatalf("west's view at resourceVersion %d with generation %d, want 10 and 1", o.ResourceVersion(), g)
	}

	s.SetRules(rules(t, c, 2, "us", regionRule(`location.metadata.labels["zone"]`)), 12)
	if got := viewJSON(t, s, "west"); !bytes.Equal(got, before) {
		t.Errorf("west's view under failing rules:\n got %s\nwant %s", got, before)
	}

	s.SetRules(rules(t, c, 3, "ap", regionRule("")), 13)
	o, _, _ = s.Get("west", "ns", "d")
	if g := o.Unstructured().GetGeneration(); g != 2 || regionIn(t, s, "west", "d") != "ap" {
		t.Errorf("west's view after the fix: generation %d, region %q; want 2 and ap", g, regionIn(t, s, "west", "d"))
	}
}

// TestRestartNeverShowsAResourceVersionWithOtherContent: after a restart (a new store whose
// first list is above every resourceVersion the previous run handed out, Cache.fence) no view
// shows an object at a resourceVersion the previous run showed with other content. In the
// previous run east's own status write at 12 showed generation 1 (its view's), while the
// source's is 3 (west's and east's records bumped it); a fresh store cannot know that 1, so it
// shows the object, whose generation has moved, at the list's resourceVersion 13, with its own
// generation, to every location; the mapper then sees a new resourceVersion and applies the
// object again. An object whose generation never moved, and one written at the list's
// resourceVersion itself (after the previous run ended), show their own. The next versions
// follow the usual rules from there, and a status write carrying 13 is the view's current
// version (TestStatusWriteAtFirstListResourceVersion, pkg/registry/view). Fails without
// settleFirstListed: the new store showed east generation 3 at resourceVersion 12.
func TestRestartNeverShowsAResourceVersionWithOtherContent(t *testing.T) {
	records := map[string]string{"west": `{"r":1}`, "east": `{"r":2}`}
	before := newTestStore(t, StoreOptions{})
	mustReplace(t, before, 10, deployment(10, 1, 3, nil))
	mustUpdate(t, before, deployment(11, 2, 3, map[string]string{"west": `{"r":1}`}))
	mustUpdate(t, before, deployment(12, 3, 3, records))
	shown := map[string]*unstructured.Unstructured{} // "location@rv" → content
	for _, loc := range []string{"east", "north", "west"} {
		u := decodeView(t, viewJSON(t, before, loc))
		shown[loc+"@"+u.GetResourceVersion()] = u
	}
	if u := shown["east@12"]; u == nil || u.GetGeneration() != 1 {
		t.Fatalf("the previous run's east view: %v, want generation 1 at 12", shown)
	}

	after := newTestStore(t, StoreOptions{})
	mustReplace(t, after, 13, deployment(12, 3, 3, records))
	for _, loc := range []string{"east", "north", "west"} {
		o, _, ok := after.Get(loc, "ns", "d")
		if !ok {
			t.Fatalf("%s's view has no d", loc)
		}
		u := decodeView(t, mustJSON(t, o))
		if prev := shown[loc+"@"+u.GetResourceVersion()]; prev != nil && !equality.Semantic.DeepEqual(prev.Object, u.Object) {
			t.Fatalf("%s's view shows resourceVersion %s with other content than the previous run:\n before %v\n  after %v", loc, u.GetResourceVersion(), prev.Object, u.Object)
		}
		if u.GetResourceVersion() != "13" || u.GetGeneration() != 3 || o.ViewGeneration(loc) != 3 {
			t.Fatalf("%s's view shows resourceVersion %s, generation %d; want 13 and 3", loc, u.GetResourceVersion(), u.GetGeneration())
		}
	}
	others := newTestStore(t, StoreOptions{})
	plain := cm("ns", "plain", 5, locs("east"))
	plain.SetGeneration(1)
	latest := cm("ns", "latest", 13, locs("east"))
	latest.SetGeneration(4)
	mustReplace(t, others, 13, plain, latest)
	for name, rv := range map[string]uint64{"plain": 5, "latest": 13} {
		if o, _, ok := others.Get("east", "ns", name); !ok || o.ResourceVersion() != rv {
			t.Fatalf("east's view of %s: %v, want resourceVersion %d", name, o, rv)
		}
	}

	// From there the usual rules: north's status write (a bump) is an event of north's view
	// only, at the generation it showed; a spec change moves every view.
	east := mustWatch(t, after, "east", WatchOptions{ResourceVersion: 13})
	north := mustWatch(t, after, "north", WatchOptions{ResourceVersion: 13})
	mustUpdate(t, after, deployment(14, 4, 3, map[string]string{"west": `{"r":1}`, "east": `{"r":2}`, "north": `{"r":3}`}))
	expect(t, east)
	expect(t, north, "MODIFIED d@14")
	expectView(t, after, "north", "14", 3)
	expectView(t, after, "east", "13", 3)
	mustUpdate(t, after, deployment(15, 5, 4, map[string]string{"west": `{"r":1}`, "east": `{"r":2}`, "north": `{"r":3}`}))
	expect(t, east, "MODIFIED d@15")
	expectView(t, after, "east", "15", 5)
}

// mustJSON returns o's JSON (a copy).
func mustJSON(t *testing.T, o *Object) []byte {
	t.Helper()
	raw, err := o.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), raw...)
}

// TestFirstListFromBytesMatchesDecoded: a restart's first list of objects whose generation has
// moved serves the same views from the source's bytes (one location: its resourceVersion
// replaced in a copy, viewFromOwnJSON; several: a template with a resourceVersion hole) as from
// decoded objects (rendered), for objects of one location and of several, one carrying its
// locations' finalizers (each view leaves out the other's), and for one that needs rendering
// anyway (a status record); and the next versions follow alike.
func TestFirstListFromBytesMatchesDecoded(t *testing.T) {
	s := twinStores{t: t, fromJSON: newTestStore(t, StoreOptions{DefaultCluster: "root"}), fromUs: newTestStore(t, StoreOptions{DefaultCluster: "root"}),
		add: source.Annotation{Key: contract.ClusterAnnotation, Value: "root"}}
	obj := func(name string, rv uint64, generation int64, l []string, extra ...string) *unstructured.Unstructured {
		u := cm("ns", name, rv, l, extra...)
		u.SetGeneration(generation)
		return u
	}
	s.replace(30,
		obj("one", 5, 3, locs("east"), "d:k=1"),
		obj("two", 6, 4, locs("east", "west"), "l:app=web"),
		obj("rec", 7, 2, locs("east", "west"), `a:status.kcp.io/east={"phase":"Up"}`, "a:kcp.io/status-policy=Reflect"),
		obj("new", 8, 1, locs("east", "west")),
		obj("fin", 9, 2, locs("east", "west"), "f:"+contract.LocationFinalizer("east"), "f:other.example/keep", "f:"+contract.LocationFinalizer("west")),
	)
	for _, name := range []string{"two", "fin"} {
		if o := s.fromJSON.objects[contract.NewKey("root", "ns", name)]; o.u != nil {
			t.Errorf("%s was decoded to show it at the list's resourceVersion", name)
		}
	}
	compare := func(when string) {
		t.Helper()
		for _, loc := range []string{"east", "west"} {
			a, errA := s.fromJSON.List(loc, ListOptions{})
			b, errB := s.fromUs.List(loc, ListOptions{})
			if errA != nil || errB != nil || len(a.Items) != len(b.Items) {
				t.Fatalf("%s, %s: lists %v %v", when, loc, errA, errB)
			}
			for i := range a.Items {
				if a.Items[i].ResourceVersion() != b.Items[i].ResourceVersion() || !reflect.DeepEqual(decoded(t, a.Items[i]), decoded(t, b.Items[i])) {
					t.Errorf("%s, %s: from bytes %v\ndecoded %v", when, loc, decoded(t, a.Items[i]), decoded(t, b.Items[i]))
				}
			}
		}
	}
	compare("first list")
	if o, _, _ := s.fromJSON.Get("west", "ns", "two"); o.ResourceVersion() != 30 || o.Unstructured().GetGeneration() != 4 {
		t.Errorf("west's two at %d generation %d, want 30 and 4", o.ResourceVersion(), o.Unstructured().GetGeneration())
	}
	s.update(obj("two", 31, 5, locs("east", "west"), "l:app=web", `a:status.kcp.io/west={"phase":"Up"}`))
	s.update(obj("one", 32, 4, locs("east"), "d:k=2"))
	compare("after updates")
}
