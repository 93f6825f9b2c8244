package cache

import (
	"context"
	"errors"
	"fmt"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
)

// regionRule is a Customization ns/region that sets data.region of every ConfigMap of ns to
// its location's region label (expression replaces the default value expression).
func regionRule(expression string) *controlv1alpha1.Customization {
	if expression == "" {
		expression = `location.metadata.labels["region"]`
	}
	return &controlv1alpha1.Customization{
		ObjectMeta: metav1.ObjectMeta{Name: "region", Namespace: "ns", Generation: 1},
		Spec: controlv1alpha1.CustomizationSpec{
			Resources: []controlv1alpha1.ResourceRule{{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}},
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "add", path: "/data/region", value: ` + expression + `}]`}}},
		},
	}
}

// rules compiles cs for the test store's cluster with east in region eu and west in westRegion.
func rules(t *testing.T, c *customization.Compiler, rv uint64, westRegion string, cs ...*controlv1alpha1.Customization) Rules {
	t.Helper()
	s, errs := c.Snapshot(rv, cs, []customization.Location{
		{Name: "east", Labels: map[string]string{"region": "eu"}},
		{Name: "west", Labels: map[string]string{"region": westRegion}},
	})
	if len(errs) > 0 {
		t.Fatalf("compile errors: %v", errs)
	}
	return s
}

// regionIn returns data.region of location's view of ns/name.
func regionIn(t testing.TB, s *ResourceStore, location, name string) string {
	t.Helper()
	o, _, ok := s.Get(location, "ns", name)
	if !ok {
		t.Fatalf("%s's view has no %s", location, name)
	}
	r, _, _ := unstructured.NestedString(o.Unstructured().Object, "data", "region")
	return r
}

// TestCustomizationRendersViews: each location's view shows the object as
// its Customizations render it, and a change of the rules (a SyncTarget relabelled) is a
// MODIFIED for the locations whose view changed, at the fresh resourceVersion read from the
// source (or, without one, at the store's, replayed by a resume from it); a source event older
// than a fresh resourceVersion that arrives late restarts the history.
func TestCustomizationRendersViews(t *testing.T) {
	c := customization.NewCompiler(customization.Options{PlainCluster: "root"})
	s := newTestStore(t, StoreOptions{})
	s.SetRules(rules(t, c, 1, "us", regionRule("")), 0)
	mustReplace(t, s, 10, cm("ns", "o", 10, locs("east", "west"), "d:replicas=10"))
	if got := regionIn(t, s, "east", "o"); got != "eu" {
		t.Errorf("east's view: region %q, want eu", got)
	}
	if got := regionIn(t, s, "west", "o"); got != "us" {
		t.Errorf("west's view: region %q, want us", got)
	}

	east := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10})
	west := mustWatch(t, s, "west", WatchOptions{ResourceVersion: 10})
	s.SetRules(rules(t, c, 2, "ap", regionRule("")), 15) // west relabelled; the source is at 15
	expect(t, west, "MODIFIED o@15")
	expectNothing(t, east)
	if got := regionIn(t, s, "west", "o"); got != "ap" {
		t.Errorf("west's view after the relabel: region %q, want ap", got)
	}
	if got := regionIn(t, s, "east", "o"); got != "eu" {
		t.Errorf("east's view after west's relabel: region %q, want eu", got)
	}
	if rv := s.ResourceVersion(); rv != 15 {
		t.Errorf("the store's resourceVersion after the re-rendering: %d, want 15", rv)
	}
	// A client that saw 10 resumes: it gets the re-rendering; from 15 or from now: nothing.
	expect(t, mustWatch(t, s, "west", WatchOptions{ResourceVersion: 10}), "MODIFIED o@15")
	expectNothing(t, mustWatch(t, s, "west", WatchOptions{ResourceVersion: 15}))
	expectNothing(t, mustWatch(t, s, "west", WatchOptions{}))

	// The next source event is seen by both, with the new rendering.
	mustUpdate(t, s, cm("ns", "o", 16, locs("east", "west"), "d:replicas=16"))
	expect(t, east, "MODIFIED o@16")
	expect(t, west, "MODIFIED o@16")
	if got := regionIn(t, s, "west", "o"); got != "ap" {
		t.Errorf("west's view after an update: region %q, want ap", got)
	}

	// Without a fresh resourceVersion the re-rendering shares the store's, and a resume from it
	// replays it.
	s.SetRules(rules(t, c, 3, "sa", regionRule("")), 0)
	expect(t, west, "MODIFIED o@16")
	expectNothing(t, east)
	expect(t, mustWatch(t, s, "west", WatchOptions{ResourceVersion: 16}), "MODIFIED o@16")
	expectNothing(t, mustWatch(t, s, "west", WatchOptions{}))

	// Rules that no longer select the object: its views show it as it is.
	s.SetRules(rules(t, c, 4, "sa"), 20)
	expect(t, east, "MODIFIED o@20")
	expect(t, west, "MODIFIED o@20")
	if got := regionIn(t, s, "east", "o"); got != "" {
		t.Errorf("east's view without Customizations: region %q, want none", got)
	}

	// A source event between 16 and 20 arriving now cannot be placed in order: the watches
	// end and resumes from before 20 answer 410.
	mustAdd(t, s, cm("ns", "p", 18, locs("east")))
	expectClosed(t, east)
	if _, err := s.Watch(context.Background(), "east", WatchOptions{ResourceVersion: 16}); !apierrors.IsResourceExpired(err) {
		t.Errorf("resume from before a late event: %v, want 410 Expired", err)
	}
	if res, err := s.List("east", ListOptions{}); err != nil || len(res.Items) != 2 || res.ResourceVersion != 20 {
		t.Errorf("east's list after the late event: %d items at %d (%v), want o and p at 20", len(res.Items), res.ResourceVersion, err)
	}
}

// TestFailingCustomizationNeverDeletes: rules that fail on objects keep every
// view's last rendering (no event), withhold objects that never rendered (503, not 404), and
// report each failing (object, location) with its Customization; fixing them shows everything.
func TestFailingCustomizationNeverDeletes(t *testing.T) {
	c := customization.NewCompiler(customization.Options{PlainCluster: "root"})
	s := newTestStore(t, StoreOptions{})
	s.SetRules(rules(t, c, 1, "us", regionRule("")), 0)
	mustReplace(t, s, 10, cm("ns", "o", 10, locs("east", "west"), "d:replicas=10"))
	east := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10})

	// A runtime error: the label does not exist.
	s.SetRules(rules(t, c, 2, "us", regionRule(`location.metadata.labels["zone"]`)), 0)
	expectNothing(t, east)
	if got := regionIn(t, s, "east", "o"); got != "eu" {
		t.Errorf("east's view under failing rules: region %q, want the last rendering (eu)", got)
	}
	mustAdd(t, s, cm("ns", "p", 11, locs("east"), "d:replicas=1"))
	expectNothing(t, east)
	var status apierrors.APIStatus
	if err := s.WithheldError("east", "", "ns", "p"); !errors.As(err, &status) || status.Status().Code != 503 {
		t.Errorf("GET of a never-rendered object: %v, want a 503", err)
	}
	if res, err := s.List("east", ListOptions{}); err != nil || len(res.Items) != 1 || res.Items[0].Name() != "o" {
		t.Errorf("east's list under failing rules: %+v %v, want o only", res.Items, err)
	}
	failures := s.RenderFailures()
	if len(failures) != 3 {
		t.Fatalf("RenderFailures: %d, want 3 (o for east and west, p for east): %+v", len(failures), failures)
	}
	for _, f := range failures {
		key, ok := f.Customization()
		if !ok || key != (customization.RuleKey{Cluster: "root", Namespace: "ns", Name: "region"}) {
			t.Errorf("failure %+v names Customization %v (%v), want root|ns/region", f, key, ok)
		}
		if f.Withheld != (f.Name == "p") {
			t.Errorf("failure of %s for %s: withheld %v", f.Name, f.Location, f.Withheld)
		}
	}

	s.SetRules(rules(t, c, 3, "us", regionRule("")), 12)
	expect(t, east, "ADDED p@12")
	if len(s.RenderFailures()) != 0 {
		t.Errorf("failures left after the fix: %+v", s.RenderFailures())
	}
	if got := regionIn(t, s, "east", "p"); got != "eu" {
		t.Errorf("east's view of p after the fix: region %q, want eu", got)
	}
}

// BenchmarkRerender measures a re-rendering after a SyncTarget is relabelled, as docs/customization.md says:
// "a change of a Customization or of a SyncTarget's labels re-renders the affected objects"):
// 10,000 ConfigMaps, of which 1,000 are in the Customization's namespace and assigned to east
// and west; west's region label changes, so those 1,000 objects are re-rendered for west and
// every other object is skipped on its namespace and labels alone (no decoding). It reports the
// time per relabel and per re-rendered object.
func BenchmarkRerender(b *testing.B) {
	c := customization.NewCompiler(customization.Options{PlainCluster: "root"})
	s := newTestStore(b, StoreOptions{})
	compile := func(rv uint64, westRegion string) Rules {
		snap, errs := c.Snapshot(rv, []*controlv1alpha1.Customization{regionRule("")}, []customization.Location{
			{Name: "east", Labels: map[string]string{"region": "eu"}},
			{Name: "west", Labels: map[string]string{"region": westRegion}},
		})
		if len(errs) > 0 {
			b.Fatalf("compile errors: %v", errs)
		}
		return snap
	}
	s.SetRules(compile(1, "us"), 0)
	const total, customized = 10_000, 1_000
	objs := make([]*unstructured.Unstructured, 0, total)
	for i := 0; i < total; i++ {
		ns := fmt.Sprintf("other-%d", i%50)
		if i < customized {
			ns = "ns"
		}
		objs = append(objs, cm(ns, fmt.Sprintf("o-%05d", i), uint64(i+1), locs("east", "west"), "d:replicas=1"))
	}
	mustReplace(b, s, total+1, objs...)
	regions := []string{"ap", "us"}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		s.SetRules(compile(uint64(n+2), regions[n%2]), uint64(total+2+n))
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*customized), "µs/re-rendered-object")
	if got := regionIn(b, s, "west", "o-00000"); got != regions[(b.N-1)%2] {
		b.Fatalf("west's view shows region %q after the last relabel, want %q", got, regions[(b.N-1)%2])
	}
}
