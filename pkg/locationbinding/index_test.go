package locationbinding

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

func selectorSpec(matchLabels map[string]string, names ...string) *controlv1alpha1.LocationBindingSpec {
	spec := &controlv1alpha1.LocationBindingSpec{LocationNames: names}
	if matchLabels != nil {
		spec.LocationSelector = &metav1.LabelSelector{MatchLabels: matchLabels}
	}
	return spec
}

var testLocations = []Location{
	{Name: "east", Labels: map[string]string{"region": "us-east", "tier": "gold"}},
	{Name: "west", Labels: map[string]string{"region": "us-west"}},
	{Name: "north", Labels: map[string]string{"region": "eu-north", "tier": "gold"}},
}

func TestIndexBinds(t *testing.T) {
	x := NewIndex([]*Binding{
		Compile(Key{"root", "tenant-a", "gold"}, selectorSpec(map[string]string{"tier": "gold"})),
		Compile(Key{"root", "tenant-a", "extra"}, selectorSpec(nil, "south")),
		Compile(Key{"root", "tenant-b", "all"}, selectorSpec(map[string]string{})),
		Compile(Key{"root", ClusterScopedNamespace, "admin"}, selectorSpec(nil, "west")),
		Compile(Key{"other", "tenant-a", "west"}, selectorSpec(nil, "west")),
	}, testLocations)
	for _, tc := range []struct {
		cluster, namespace, location string
		want                         bool
	}{
		{"root", "tenant-a", "east", true},
		{"root", "tenant-a", "north", true},
		{"root", "tenant-a", "west", false}, // not gold
		{"root", "tenant-a", "south", true}, // by name, not registered
		{"root", "tenant-a", "nowhere", false},
		{"root", "tenant-b", "west", true}, // the empty selector: every registered location
		{"root", "tenant-b", "south", false},
		{"root", "tenant-c", "east", false}, // no binding
		{"root", "", "west", true},          // cluster-scoped: bound by the control namespace
		{"root", "", "east", false},
		{"root", ClusterScopedNamespace, "west", true},
		{"other", "tenant-a", "east", false}, // another logical cluster
		{"other", "tenant-a", "west", true},
		{"other", "", "west", false},
	} {
		if got := x.Binds(tc.cluster, tc.namespace, tc.location); got != tc.want {
			t.Errorf("Binds(%q, %q, %q) = %v, want %v", tc.cluster, tc.namespace, tc.location, got, tc.want)
		}
	}
	if got, want := x.Bound("root", "tenant-a"), []string{"east", "north", "south"}; !slices.Equal(got, want) {
		t.Errorf("Bound(tenant-a) = %v, want %v", got, want)
	}
	if got, ok := x.Selected(Key{"root", "tenant-a", "gold"}); !ok || !slices.Equal(got, []string{"east", "north"}) {
		t.Errorf("Selected(gold) = %v, %v; want [east north], true", got, ok)
	}
	if _, ok := x.Selected(Key{"root", "tenant-a", "missing"}); ok {
		t.Error("Selected of a binding the Index does not hold reported true")
	}
}

func TestNilIndexIsOpen(t *testing.T) {
	var x *Index
	if !x.Binds("root", "tenant-a", "anywhere") || !x.Scope("", "").Binds("x") {
		t.Error("a nil Index must bind every location (the Open mode)")
	}
	if empty := NewIndex(nil, testLocations); empty.Binds("root", "tenant-a", "east") {
		t.Error("an Index without bindings must bind nothing (the Bound mode)")
	}
}

func TestInvalidBindingBindsNothing(t *testing.T) {
	b := Compile(Key{"root", "tenant-a", "bad"}, &controlv1alpha1.LocationBindingSpec{LocationSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near", Values: []string{"gold"}}},
	}, LocationNames: []string{"east"}})
	if b.Err() == nil {
		t.Fatal("a selector with an unknown operator compiled without error")
	}
	if NewIndex([]*Binding{b}, testLocations).Binds("root", "tenant-a", "east") {
		t.Error("an invalid binding bound a location")
	}
	if Compile(Key{"root", "tenant-a", "empty"}, &controlv1alpha1.LocationBindingSpec{}).Err() == nil {
		t.Error("a spec with neither selector nor names compiled without error")
	}
}

func TestChanged(t *testing.T) {
	gold := Compile(Key{"root", "tenant-a", "gold"}, selectorSpec(map[string]string{"tier": "gold"}))
	b := Compile(Key{"root", "tenant-b", "west"}, selectorSpec(nil, "west"))
	before := NewIndex([]*Binding{gold, b}, testLocations)

	relabeled := slices.Clone(testLocations)
	relabeled[1] = Location{Name: "west", Labels: map[string]string{"region": "us-west", "tier": "gold"}}
	for _, tc := range []struct {
		name  string
		after *Index
		want  map[string]bool // namespace of cluster root -> changed
	}{
		{"same bindings, new Index", NewIndex([]*Binding{gold, b}, testLocations), map[string]bool{"tenant-a": false, "tenant-b": false}},
		{"a SyncTarget's labels now match a selector", NewIndex([]*Binding{gold, b}, relabeled), map[string]bool{"tenant-a": true, "tenant-b": false}},
		{"a binding removed", NewIndex([]*Binding{gold}, testLocations), map[string]bool{"tenant-a": false, "tenant-b": true}},
		{"a binding added", NewIndex([]*Binding{gold, b, Compile(Key{"root", "tenant-c", "x"}, selectorSpec(nil, "east"))}, testLocations),
			map[string]bool{"tenant-a": false, "tenant-b": false, "tenant-c": true}},
		{"a registered location renamed away", NewIndex([]*Binding{gold, b}, testLocations[1:]), map[string]bool{"tenant-a": true, "tenant-b": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.after.Changed(before)
			for ns, want := range tc.want {
				if got := c.Has("root", ns); got != want {
					t.Errorf("Changed.Has(%s) = %v, want %v", ns, got, want)
				}
			}
		})
	}
	if c := (*Index)(nil).Changed(before); !c.Has("root", "anything") {
		t.Error("between Open and Bound every namespace must count as changed")
	}
	if c := before.Changed(before); c.Any() {
		t.Error("an Index compared with itself changed")
	}
}

// TestScopeBindsAllocatesNothing holds the promise the cache's ingest relies on: a lookup per
// object and location allocates nothing.
func TestScopeBindsAllocatesNothing(t *testing.T) {
	var bindings []*Binding
	var locs []Location
	for i := range 200 {
		locs = append(locs, Location{Name: fmt.Sprintf("loc-%d", i), Labels: map[string]string{"n": fmt.Sprint(i % 7)}})
		bindings = append(bindings, Compile(Key{"root", fmt.Sprintf("tenant-%d", i), "b"}, selectorSpec(map[string]string{"n": fmt.Sprint(i % 7)})))
	}
	x := NewIndex(bindings, locs)
	allocs := testing.AllocsPerRun(100, func() {
		s := x.Scope("root", "tenant-3")
		_ = s.Binds("loc-3") && s.Binds("loc-4")
	})
	if allocs != 0 {
		t.Errorf("Scope and Binds allocate %v times per run, want 0", allocs)
	}
	if !x.Binds("root", "tenant-3", "loc-10") || x.Binds("root", "tenant-3", "loc-4") {
		t.Error("selector bindings over 200 locations bind the wrong locations")
	}
}

func TestParseMode(t *testing.T) {
	for _, s := range []string{"Bound", "Open"} {
		if m, err := ParseMode(s); err != nil || string(m) != s {
			t.Errorf("ParseMode(%q) = %q, %v", s, m, err)
		}
	}
	if _, err := ParseMode("bound"); err == nil {
		t.Error(`ParseMode("bound") accepted a mode in the wrong case`)
	}
}

// BenchmarkScopeBinds measures what the cache adds to an object version in the Bound mode: the
// bound-set lookup of its namespace and one lookup per assigned location (three here), in an
// Index of 1,000 namespaces each bound by a selector over 1,000 registered locations.
func BenchmarkScopeBinds(b *testing.B) {
	var bindings []*Binding
	var locs []Location
	for i := range 1000 {
		locs = append(locs, Location{Name: fmt.Sprintf("loc-%03d", i), Labels: map[string]string{"zone": fmt.Sprint(i % 10)}})
		bindings = append(bindings, Compile(Key{"root", fmt.Sprintf("ns-%d", i), "b"}, selectorSpec(map[string]string{"zone": fmt.Sprint(i % 10)})))
	}
	x := NewIndex(bindings, locs)
	assigned := []string{"loc-007", "loc-017", "loc-503"}
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		s := x.Scope("root", "ns-7")
		for _, l := range assigned {
			if !s.Binds(l) && l != "loc-503" {
				b.Fatal(l)
			}
		}
	}
}
