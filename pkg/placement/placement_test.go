package placement

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

func TestDivide(t *testing.T) {
	for _, tc := range []struct {
		replicas int64
		locs     []string
		weights  []int64
		want     map[string]int64
	}{
		{10, []string{"b", "a", "c"}, nil, map[string]int64{"b": 4, "a": 3, "c": 3}},
		{10, []string{"a", "b"}, nil, map[string]int64{"a": 5, "b": 5}},
		{2, []string{"a", "b", "c"}, nil, map[string]int64{"a": 1, "b": 1, "c": 0}},
		{0, []string{"a", "b"}, nil, map[string]int64{"a": 0, "b": 0}},
		{10, []string{"a", "b"}, []int64{3, 1}, map[string]int64{"a": 8, "b": 2}}, // 7.5/2.5: tie of remainders goes to the larger weight
		{10, []string{"a", "b"}, []int64{1, 3}, map[string]int64{"a": 2, "b": 8}}, // same, rank does not win over weight
		{7, []string{"a", "b", "c"}, []int64{0, 0, 5}, map[string]int64{"a": 0, "b": 0, "c": 7}},
		{5, []string{"a", "b"}, []int64{0, 0}, map[string]int64{"a": 3, "b": 2}},               // all zero: equal
		{3, []string{"a", "b"}, []int64{64 << 30, 32 << 30}, map[string]int64{"a": 2, "b": 1}}, // memory in bytes: scaled
	} {
		got := Divide(tc.replicas, tc.locs, tc.weights)
		if !maps.Equal(got, tc.want) {
			t.Errorf("Divide(%d, %v, %v) = %v, want %v", tc.replicas, tc.locs, tc.weights, got, tc.want)
		}
		var sum int64
		for _, v := range got {
			sum += v
		}
		if sum != tc.replicas {
			t.Errorf("Divide(%d, %v, %v) sums to %d", tc.replicas, tc.locs, tc.weights, sum)
		}
	}
}

// TestRankMovesFewObjects: with 2 of 5 locations per object, removing one moves only the
// objects that had it, and adding one takes only objects that now rank it among their first 2.
func TestRankMovesFewObjects(t *testing.T) {
	locs := []string{"l1", "l2", "l3", "l4", "l5"}
	first2 := func(key string, locs []string) []string {
		r := Rank(key, locs)[:2]
		slices.Sort(r)
		return r
	}
	moved, had := 0, 0
	perLocation := map[string]int{}
	for i := range 1000 {
		key := fmt.Sprintf("configmaps/ns/o%d", i)
		before := first2(key, locs)
		for _, l := range before {
			perLocation[l]++
		}
		after := first2(key, slices.DeleteFunc(slices.Clone(locs), func(l string) bool { return l == "l3" }))
		if slices.Contains(before, "l3") {
			had++
		} else if !slices.Equal(before, after) {
			t.Fatalf("%s moved from %v to %v although it was not on l3", key, before, after)
		}
		if !slices.Equal(before, after) {
			moved++
		}
	}
	if moved != had || had == 0 {
		t.Errorf("%d objects moved, %d were on l3", moved, had)
	}
	for l, n := range perLocation {
		if n < 300 || n > 500 { // 400 expected each
			t.Errorf("%s holds %d of 2000 placements, want about 400", l, n)
		}
	}
}

func loc(name string, ready bool, since time.Time, lbls ...string) Location {
	l := Location{Name: name, Ready: ready, Since: since, Labels: map[string]string{}}
	for i := 0; i+1 < len(lbls); i += 2 {
		l.Labels[lbls[i]] = lbls[i+1]
	}
	return l
}

func compile(t *testing.T, spec controlv1alpha1.PlacementSpec) *Policy {
	t.Helper()
	spec.Resources = []controlv1alpha1.ResourceRule{{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}}
	if spec.LocationSelector == nil && spec.LocationNames == nil {
		spec.LocationSelector = &metav1.LabelSelector{}
	}
	p, err := Compile(&spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRelatedCopiesNeverSelected: a Placement selecting every object (no objectSelector, or one
// matching the labels) selects no related copy (label related.kcp.io/location naming a
// location), whose place is its location's view alone; a label value that is no location name
// makes no related copy.
func TestRelatedCopiesNeverSelected(t *testing.T) {
	for _, sel := range []*metav1.LabelSelector{nil, {MatchLabels: map[string]string{"app": "db"}}} {
		p := compile(t, controlv1alpha1.PlacementSpec{ObjectSelector: sel})
		if !p.SelectsObject(map[string]string{"app": "db"}) {
			t.Fatalf("selector %v: an ordinary object is not selected", sel)
		}
		if p.SelectsObject(map[string]string{"app": "db", contract.RelatedLocationLabel: "east"}) {
			t.Errorf("selector %v: east's related copy is selected", sel)
		}
		if !p.SelectsObject(map[string]string{"app": "db", contract.RelatedLocationLabel: "Not_A_Location"}) {
			t.Errorf("selector %v: an object whose label names no location is not selected", sel)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	rules := []controlv1alpha1.ResourceRule{{APIGroups: []string{"*"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}}
	if _, err := Compile(&controlv1alpha1.PlacementSpec{Resources: rules, LocationSelector: &metav1.LabelSelector{}}); err == nil {
		t.Error("a wildcard resource compiled")
	}
	ok := []controlv1alpha1.ResourceRule{{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}
	if _, err := Compile(&controlv1alpha1.PlacementSpec{Resources: ok}); err == nil {
		t.Error("a Placement without locations compiled")
	}
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}
	if _, err := Compile(&controlv1alpha1.PlacementSpec{Resources: ok, LocationSelector: bad}); err == nil {
		t.Error("a bad selector compiled")
	}
}

// TestDecideDivide: 10 replicas over 3 Ready locations is 4/3/3; a location not Ready beyond
// the tolerance is left out (5/5), and comes back only after the tolerance has passed since
// its objects moved, however it flaps.
func TestDecideDivide(t *testing.T) {
	p := compile(t, controlv1alpha1.PlacementSpec{Replicas: controlv1alpha1.ReplicasDivide, NotReadyTolerance: &metav1.Duration{Duration: time.Minute}})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	locs := []Location{loc("east", true, t0), loc("north", true, t0), loc("west", true, t0)}
	now := t0.Add(time.Hour)
	pool := p.Pool(locs, nil, now)
	d := p.Decide("deployments.apps//apps/web", nil, 10, pool)
	if got := fmt.Sprint(d.Locations, sortedParts(d.Replicas)); got != "[east north west] [3 3 4]" {
		t.Errorf("3 Ready locations: %s", got)
	}

	// west goes NotReady at now: within the tolerance nothing changes, and Next says when.
	locs[2] = loc("west", false, now)
	pool = p.Pool(locs, nil, now.Add(30*time.Second))
	if d := p.Decide("deployments.apps//apps/web", d.Locations, 10, pool); len(d.Locations) != 3 || !pool.Next.Equal(now.Add(time.Minute)) {
		t.Errorf("within the tolerance: %v, next %v", d.Locations, pool.Next)
	}
	evictedAt := now.Add(time.Minute)
	pool = p.Pool(locs, nil, evictedAt)
	d = p.Decide("deployments.apps//apps/web", d.Locations, 10, pool)
	if got := fmt.Sprint(d.Locations, sortedParts(d.Replicas)); got != "[east north] [5 5]" || !pool.Evictions["west"].Equal(evictedAt) {
		t.Errorf("beyond the tolerance: %s, evictions %v", got, pool.Evictions)
	}

	// west is Ready again 10s later: held until the tolerance has passed since the eviction.
	locs[2] = loc("west", true, evictedAt.Add(10*time.Second))
	pool = p.Pool(locs, pool.Evictions, evictedAt.Add(20*time.Second))
	if d := p.Decide("deployments.apps//apps/web", d.Locations, 10, pool); len(d.Locations) != 2 || !pool.Next.Equal(evictedAt.Add(time.Minute)) {
		t.Errorf("back before the tolerance passed: %v, next %v", d.Locations, pool.Next)
	}
	pool = p.Pool(locs, pool.Evictions, evictedAt.Add(time.Minute))
	if d := p.Decide("deployments.apps//apps/web", d.Locations, 10, pool); len(d.Locations) != 3 || len(pool.Evictions) != 0 {
		t.Errorf("back after the tolerance: %v, evictions %v", d.Locations, pool.Evictions)
	}

	// Unschedulable: re-divided without it.
	locs[0].Unschedulable = true
	pool = p.Pool(locs, nil, evictedAt.Add(2*time.Minute))
	if d := p.Decide("deployments.apps//apps/web", nil, 10, pool); fmt.Sprint(d.Locations) != "[north west]" {
		t.Errorf("east unschedulable: %v", d.Locations)
	}

	// Nothing usable: keep what is there.
	for i := range locs {
		locs[i] = loc(locs[i].Name, false, t0)
	}
	pool = p.Pool(locs, nil, now)
	if d := p.Decide("deployments.apps//apps/web", []string{"east", "north"}, 10, pool); !d.Keep || fmt.Sprint(d.Stuck) != "[east north]" {
		t.Errorf("no usable location: %+v", d)
	}
	// 1 replica over 3: one location; 0 replicas: the first.
	pool = p.Pool([]Location{loc("a", true, t0), loc("b", true, t0), loc("c", true, t0)}, nil, now)
	if d := p.Decide("k", nil, 1, pool); len(d.Locations) != 1 {
		t.Errorf("1 replica: %v", d.Locations)
	}
	if d := p.Decide("k", nil, 0, pool); len(d.Locations) != 1 || d.Replicas[d.Locations[0]] != 0 {
		t.Errorf("0 replicas: %+v", d)
	}
}

func sortedParts(m map[string]int64) []int64 {
	return slices.Sorted(maps.Values(m))
}

// TestDecideDuplicate: numberOfLocations 2 over 4; sticky choices; a failed location is
// replaced when another is free and kept (stuck) otherwise; unschedulable keeps, takes nothing new.
func TestDecideDuplicate(t *testing.T) {
	p := compile(t, controlv1alpha1.PlacementSpec{NumberOfLocations: ptr.To[int32](2), NotReadyTolerance: &metav1.Duration{Duration: time.Minute}})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	locs := []Location{loc("a", true, t0), loc("b", true, t0), loc("c", true, t0), loc("d", true, t0)}
	pool := p.Pool(locs, nil, now)
	first := p.Decide("k", nil, 0, pool)
	if len(first.Locations) != 2 {
		t.Fatalf("chosen %v", first.Locations)
	}
	// A fifth location appears: the object stays where it is.
	locs = append(locs, loc("e", true, now))
	if d := p.Decide("k", first.Locations, 0, p.Pool(locs, nil, now)); !slices.Equal(d.Locations, first.Locations) {
		t.Errorf("a new location moved the object: %v -> %v", first.Locations, d.Locations)
	}
	// One of its locations fails: replaced, the other stays.
	gone, stays := first.Locations[0], first.Locations[1]
	for i := range locs {
		if locs[i].Name == gone {
			locs[i] = loc(gone, false, now)
		}
	}
	pool = p.Pool(locs, nil, now.Add(time.Minute))
	d := p.Decide("k", first.Locations, 0, pool)
	if len(d.Locations) != 2 || !slices.Contains(d.Locations, stays) || slices.Contains(d.Locations, gone) || len(d.Stuck) != 0 {
		t.Errorf("%s failed: %v -> %+v", gone, first.Locations, d)
	}
	// It comes back (Ready, tolerance passed): the object does not go back.
	for i := range locs {
		if locs[i].Name == gone {
			locs[i] = loc(gone, true, now.Add(90*time.Second))
		}
	}
	pool = p.Pool(locs, pool.Evictions, now.Add(3*time.Minute))
	if d2 := p.Decide("k", d.Locations, 0, pool); !slices.Equal(d2.Locations, d.Locations) {
		t.Errorf("%s came back and took the object back: %v -> %v", gone, d.Locations, d2.Locations)
	}
	// Everything but the current two fail: stuck.
	all := []Location{loc("a", false, t0), loc("b", false, t0)}
	pool = p.Pool(all, nil, now)
	if d := p.Decide("k", []string{"a", "b"}, 0, pool); fmt.Sprint(d.Locations, d.Stuck) != "[a b] [a b]" {
		t.Errorf("no replacement: %+v", d)
	}
	// Unschedulable: keeps its object, gets no new one.
	us := []Location{loc("a", true, t0), loc("b", true, t0), loc("c", true, t0)}
	us[0].Unschedulable = true
	pool = p.Pool(us, nil, now)
	if d := p.Decide("k", []string{"a", "b"}, 0, pool); fmt.Sprint(d.Locations) != "[a b]" {
		t.Errorf("unschedulable a lost its object: %v", d.Locations)
	}
	if d := p.Decide("k", nil, 0, pool); fmt.Sprint(d.Locations) != "[b c]" {
		t.Errorf("unschedulable a got a new object: %v", d.Locations)
	}
	// No location matches any more: the object keeps its assignment.
	if d := p.Decide("k", []string{"a", "b"}, 0, p.Pool(nil, nil, now)); !d.Keep {
		t.Errorf("no location at all: %+v, want Keep", d)
	}
	// All matching (no numberOfLocations): every usable one, held ones kept.
	pAll := compile(t, controlv1alpha1.PlacementSpec{LocationSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}, NotReadyTolerance: &metav1.Duration{Duration: time.Minute}})
	eu := []Location{loc("a", true, t0, "region", "eu"), loc("b", false, t0, "region", "eu"), loc("c", true, t0, "region", "us")}
	pool = pAll.Pool(eu, nil, now)
	if d := pAll.Decide("k", []string{"a", "b"}, 0, pool); fmt.Sprint(d.Locations, d.Stuck) != "[a b] [b]" {
		t.Errorf("all of eu: %+v", d)
	}
}

func TestCapacityWeights(t *testing.T) {
	st := func(name, cpu string) *controlv1alpha1.SyncTarget {
		s := &controlv1alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: name}}
		s.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		s.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}
		return s
	}
	p := compile(t, controlv1alpha1.PlacementSpec{Replicas: controlv1alpha1.ReplicasDivide, Weights: &controlv1alpha1.PlacementWeights{Capacity: "cpu"}})
	pool := p.Pool([]Location{LocationOf(st("big", "3")), LocationOf(st("small", "500m"))}, nil, time.Now())
	if d := p.Decide("k", nil, 7, pool); d.Replicas["big"] != 6 || d.Replicas["small"] != 1 {
		t.Errorf("7 replicas by cpu 3 : 0.5: %v", d.Replicas)
	}
	pl := compile(t, controlv1alpha1.PlacementSpec{Replicas: controlv1alpha1.ReplicasDivide, Weights: &controlv1alpha1.PlacementWeights{Label: "weight"}})
	pool = pl.Pool([]Location{loc("x", true, time.Time{}, "weight", "1"), loc("y", true, time.Time{}, "weight", "4"), loc("z", true, time.Time{}, "weight", "nope")}, nil, time.Now())
	if d := pl.Decide("k", nil, 10, pool); fmt.Sprint(d.Locations, d.Replicas) != "[x y] map[x:2 y:8]" {
		t.Errorf("10 replicas by label weights 1, 4, invalid: %v %v", d.Locations, d.Replicas)
	}
}

// TestNewWorkOnlyOnReadyLocations: a location that has never been Ready (registered a moment
// ago) takes no new group and no divided replicas, whatever it ranks; one that is not Ready
// within its tolerance keeps what it has and takes nothing new.
func TestNewWorkOnlyOnReadyLocations(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	fresh := loc("fresh", false, now.Add(-10*time.Second)) // no Ready condition: Since is its creation
	locs := []Location{loc("a", true, t0), loc("b", true, t0), fresh}
	dup := compile(t, specOf(1, ""))
	div := compile(t, specOf(0, controlv1alpha1.ReplicasDivide))
	for i := range 200 {
		key := GroupKey("", fmt.Sprintf("ns-%d", i))
		if d := dup.Decide(key, nil, 0, dup.Pool(locs, nil, now)); slices.Contains(d.Locations, "fresh") || len(d.Locations) != 1 {
			t.Fatalf("%s: a new group went to %v", key, d.Locations)
		}
		if d := div.Decide(key, nil, 10, div.Pool(locs, nil, now)); slices.Contains(d.Locations, "fresh") || len(d.Locations) != 2 {
			t.Fatalf("%s: divided over %v", key, d.Locations)
		}
	}
	// b is not Ready since 10 s (tolerance 5m): Divide keeps its part, a new group avoids it.
	locs[1] = loc("b", false, now.Add(-10*time.Second))
	if d := div.Decide("k", []string{"a", "b"}, 10, div.Pool(locs, nil, now)); fmt.Sprint(d.Locations) != "[a b]" {
		t.Errorf("divided over %v, want b to keep its part within the tolerance", d.Locations)
	}
	if d := div.Decide("k", nil, 10, div.Pool(locs, nil, now)); fmt.Sprint(d.Locations) != "[a]" {
		t.Errorf("a new group divided over %v, want a alone", d.Locations)
	}
	if d := dup.Decide("k", []string{"b"}, 0, dup.Pool(locs, nil, now)); fmt.Sprint(d.Locations) != "[b]" {
		t.Errorf("a group on b within the tolerance moved to %v", d.Locations)
	}
}

// TestGroupChoice: a group is ranked once over the union of its objects' locations, so a
// group left on two locations (a move interrupted) ends up together, and a group on a held
// location moves whole to one new location, never split between the two.
func TestGroupChoice(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	p := compile(t, specOf(1, ""))
	locs := []Location{loc("a", true, t0), loc("b", true, t0), loc("c", true, t0)}
	pool := p.Pool(locs, nil, now)
	key := GroupKey("", "shop")
	c := p.Choose(key, []string{"a", "b"}, pool)
	if len(c.Locations) != 1 || (c.Locations[0] != "a" && c.Locations[0] != "b") {
		t.Fatalf("a group on a and b chose %v, want one of them", c.Locations)
	}
	for _, replicas := range []int64{0, 3} {
		if d := p.Split(c, replicas, pool); !slices.Equal(d.Locations, c.Locations) {
			t.Errorf("an object of the group goes to %v, the group to %v", d.Locations, c.Locations)
		}
	}
	// a fails beyond the tolerance: the whole group moves to b or c, and nothing stays on a.
	locs[0] = loc("a", false, t0)
	pool = p.Pool(locs, nil, now)
	c = p.Choose(key, []string{"a"}, pool)
	if len(c.Locations) != 1 || c.Locations[0] == "a" || len(c.Stuck) != 0 {
		t.Errorf("a group on a held location chose %+v", c)
	}
	// The group key is the namespace's: every Placement of it ranks alike, different
	// namespaces spread.
	used := map[string]bool{}
	pool = p.Pool([]Location{loc("a", true, t0), loc("b", true, t0), loc("c", true, t0)}, nil, now)
	for i := range 30 {
		used[p.Choose(GroupKey("", fmt.Sprintf("ns-%d", i)), nil, pool).Locations[0]] = true
	}
	if len(used) != 3 {
		t.Errorf("30 namespaces on %v, want all 3 locations", used)
	}
}

// specOf returns a spec with numberOfLocations n (0: unset) and replicas.
func specOf(n int32, replicas string) controlv1alpha1.PlacementSpec {
	spec := controlv1alpha1.PlacementSpec{Replicas: replicas}
	if n > 0 {
		spec.NumberOfLocations = ptr.To(n)
	}
	return spec
}

// TestPoolWithout: a location whose target does not serve a resource compatibly (as its
// mapper reported in status.resources) takes no new objects, in both modes, and keeps the ones
// it has; the pool it came from is unchanged.
func TestPoolWithout(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := &controlv1alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: "west"}, Status: controlv1alpha1.SyncTargetStatus{Resources: []controlv1alpha1.ResourceState{
		{Resource: "configmaps", State: controlv1alpha1.ResourceSynced},
		{Resource: "gadgets.example.com", State: controlv1alpha1.ResourceHalted, Reason: controlv1alpha1.ReasonTargetLacksResource},
		{Resource: "widgets.example.com", State: controlv1alpha1.ResourceSynced, Reason: controlv1alpha1.ReasonSchemaIncompatible},
		{Resource: "things.example.com", State: controlv1alpha1.ResourceSynced, Reason: controlv1alpha1.ReasonSchemaUnknown},
	}}}
	west := LocationOf(st)
	if r, ok := west.Serves("gadgets.example.com"); ok || r != controlv1alpha1.ReasonTargetLacksResource {
		t.Errorf("west serves gadgets: %v %q", ok, r)
	}
	if r, ok := west.Serves("widgets.example.com"); ok || r != controlv1alpha1.ReasonSchemaIncompatible {
		t.Errorf("west serves widgets: %v %q", ok, r)
	}
	for _, gr := range []string{"configmaps", "things.example.com"} {
		if _, ok := west.Serves(gr); !ok {
			t.Errorf("west does not serve %s", gr)
		}
	}
	if _, ok := loc("east", true, t0).Serves("gadgets.example.com"); !ok {
		t.Error("a location that reported nothing does not serve gadgets")
	}
	west.Ready, west.Since = true, t0
	locs := []Location{loc("east", true, t0), west}
	for _, spec := range []controlv1alpha1.PlacementSpec{{}, {Replicas: controlv1alpha1.ReplicasDivide}, {NumberOfLocations: ptr.To[int32](2)}} {
		p := compile(t, spec)
		pool := p.Pool(locs, nil, t0.Add(time.Hour))
		narrowed := pool.Without(sets.New("west"))
		if d := p.Decide("k", nil, 4, narrowed); fmt.Sprint(d.Locations) != "[east]" {
			t.Errorf("%+v: a new object goes to %v, want [east]", spec, d.Locations)
		}
		if d := p.Decide("k", []string{"east", "west"}, 4, narrowed); fmt.Sprint(d.Locations) != "[east west]" {
			t.Errorf("%+v: an object on east and west goes to %v, want to stay", spec, d.Locations)
		}
		if d := p.Decide("k", nil, 4, pool); fmt.Sprint(d.Locations) != "[east west]" {
			t.Errorf("%+v: the pool Without was called on changed: %v", spec, d.Locations)
		}
	}
}
