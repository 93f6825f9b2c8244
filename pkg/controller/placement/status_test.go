package placement

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/placement"
)

// TestStatus: the Ready condition says why objects do not move or are not placed.
func TestStatus(t *testing.T) {
	spec := controlv1alpha1.PlacementSpec{
		Resources:         []controlv1alpha1.ResourceRule{{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}},
		LocationSelector:  &metav1.LabelSelector{},
		NotReadyTolerance: &metav1.Duration{Duration: time.Minute},
	}
	policy, err := placement.Compile(&spec)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	down := placement.Location{Name: "east", Since: t0}
	newEntry := func() *entry {
		return &entry{pl: controlv1alpha1.Placement{Spec: spec}, policy: policy, locations: sets.New[string](), stuck: sets.New[string](),
			groups: sets.New[string](), unmirrored: sets.New[string](),
			pool: policy.Pool([]placement.Location{down}, nil, t0.Add(time.Hour))}
	}
	for _, tc := range []struct {
		name   string
		change func(e *entry)
		reason string
		text   string
	}{
		{"stuck on a location not Ready", func(e *entry) { e.placed, e.stuck = 3, sets.New("east") }, controlv1alpha1.ReasonNotReadyLocations, "east not Ready for longer than 1m0s"},
		{"every location held, nothing placed", func(*entry) {}, controlv1alpha1.ReasonNoLocations, "every matching location (east)"},
		{"conflicts", func(e *entry) {
			e.placed = 1
			e.conflict(schema.GroupResource{Resource: "configmaps"}, "a", controlv1alpha1.ConflictAssignedByOther, "by hand")
		}, controlv1alpha1.ReasonConflicts, "1 selected objects are not placed"},
		{"a younger Placement is no loss", func(e *entry) {
			e.placedOn(schema.GroupResource{Resource: "configmaps"}, "/ns", []string{"west"})
			e.conflict(schema.GroupResource{Resource: "configmaps"}, "a", controlv1alpha1.ConflictYoungerPlacement, "younger")
		}, controlv1alpha1.ReasonPlaced, "1 objects in 1 groups placed on 1 locations"},
		{"a resource the source does not serve", func(e *entry) {
			e.placedOn(schema.GroupResource{Resource: "configmaps"}, "/ns", []string{"west"})
			e.notServed = []string{"the source does not serve deployment.apps"}
		}, controlv1alpha1.ReasonResourceNotServed, "the source does not serve deployment.apps; the other resources are placed"},
		{"a resource the views do not mirror", func(e *entry) {
			e.locs = map[string]placement.Location{"west": {Name: "west", Resources: sets.New("configmaps")}}
			e.placedOn(schema.GroupResource{Resource: "secrets"}, "/ns", []string{"west"})
			e.pl.Status.UnmirroredDependencies = []string{"services"}
		}, controlv1alpha1.ReasonNotMirrored, "do not serve secrets, services"},
	} {
		e := newEntry()
		tc.change(e)
		st := e.status()
		c := meta.FindStatusCondition(st.Conditions, controlv1alpha1.PlacementReady)
		if c == nil || c.Reason != tc.reason || !strings.Contains(c.Message, tc.text) {
			t.Errorf("%s: Ready %+v, want reason %s with %q", tc.name, c, tc.reason, tc.text)
		}
		if len(st.Evictions) != 1 || st.Evictions[0].Location != "east" {
			t.Errorf("%s: evictions %+v, want east", tc.name, st.Evictions)
		}
	}
}

// TestStatusSkipsIncompatible: a matching location whose mapper reports a placed resource
// unserved takes none of the group's new objects, and the Ready message names it with the
// resource and reason; when no location remains, Ready is False (NoLocations).
func TestStatusSkipsIncompatible(t *testing.T) {
	spec := controlv1alpha1.PlacementSpec{
		Resources:        []controlv1alpha1.ResourceRule{{APIGroups: []string{"example.com"}, APIVersions: []string{"v1"}, Resources: []string{"gadgets"}}},
		LocationSelector: &metav1.LabelSelector{},
	}
	policy, err := placement.Compile(&spec)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	gadgets := schema.GroupResource{Group: "example.com", Resource: "gadgets"}
	lacking := func(name string) placement.Location {
		return placement.Location{Name: name, Ready: true, Since: t0,
			Unserved: map[string]string{gadgets.String(): controlv1alpha1.ReasonTargetLacksResource}}
	}
	east := placement.Location{Name: "east", Ready: true, Since: t0}
	newEntry := func(locs ...placement.Location) *entry {
		return &entry{pl: controlv1alpha1.Placement{Spec: spec}, policy: policy, unserved: locs, locations: sets.New[string](), stuck: sets.New[string](),
			groups: sets.New[string](), unmirrored: sets.New[string](), pool: policy.Pool(locs, nil, t0.Add(time.Hour)),
			members: []*member{{gvr: gadgets.WithVersion("v1"), obj: &metav1.ObjectMeta{Name: "g"}}}}
	}

	e := newEntry(east, lacking("west"))
	choice := policy.Choose("k", nil, e.compatiblePool(sets.New(gadgets.String(), "configmaps")))
	if fmt.Sprint(choice.Locations) != "[east]" {
		t.Errorf("chosen %v, want [east]", choice.Locations)
	}
	e.placedOn(gadgets, "/ns", choice.Locations)
	c := meta.FindStatusCondition(e.status().Conditions, controlv1alpha1.PlacementReady)
	want := "1 selected locations do not serve its resources compatibly and take none of its new objects: west (gadgets.example.com: TargetLacksResource)"
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, want) {
		t.Errorf("Ready %+v, want True with %q", c, want)
	}

	e = newEntry(lacking("west"), lacking("north"))
	if choice := policy.Choose("k", nil, e.compatiblePool(sets.New(gadgets.String()))); len(choice.Locations) != 0 {
		t.Errorf("chosen %v, want none", choice.Locations)
	}
	c = meta.FindStatusCondition(e.status().Conditions, controlv1alpha1.PlacementReady)
	want = "no matching location serves the selected objects' resources compatibly; 2 selected locations do not serve its resources compatibly and take none of its new objects: north (gadgets.example.com: TargetLacksResource), west (gadgets.example.com: TargetLacksResource)"
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != controlv1alpha1.ReasonNoLocations || c.Message != want {
		t.Errorf("Ready %+v, want False, NoLocations, %q", c, want)
	}
}
