package cache

import (
	"errors"
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
func regionIn(t *testing.T, s *ResourceStore, location, name string) string {
	t.Helper()
	o, _, ok := s.Get(location, "ns", name)
	if !ok {
		t.Fatalf("%s's view has no %s", location, name)
	}
	r, _, _ := unstructured.NestedString(o.Unstructured().Object, "data", "region")
	return r
}

// TestCustomizationRendersViews (issue 14 items 1-3): each location's view shows the object as
// its Customizations render it, and a change of the rules (a SyncTarget relabelled) is a
// MODIFIED for the locations whose view changed, at the store's resourceVersion, replayed by
// a resume from that resourceVersion and by no other watch.
func TestCustomizationRendersViews(t *testing.T) {
	c := customization.NewCompiler(customization.Options{PlainCluster: "root"})
	s := newTestStore(t, StoreOptions{})
	s.SetRules(rules(t, c, 1, "us", regionRule("")))
	mustReplace(t, s, 10, cm("ns", "o", 10, locs("east", "west"), "d:replicas=10"))
	if got := regionIn(t, s, "east", "o"); got != "eu" {
		t.Errorf("east's view: region %q, want eu", got)
	}
	if got := regionIn(t, s, "west", "o"); got != "us" {
		t.Errorf("west's view: region %q, want us", got)
	}

	east := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10})
	west := mustWatch(t, s, "west", WatchOptions{ResourceVersion: 10})
	s.SetRules(rules(t, c, 2, "ap", regionRule(""))) // west relabelled
	expect(t, west, "MODIFIED o@10")
	expectNothing(t, east)
	if got := regionIn(t, s, "west", "o"); got != "ap" {
		t.Errorf("west's view after the relabel: region %q, want ap", got)
	}
	if got := regionIn(t, s, "east", "o"); got != "eu" {
		t.Errorf("east's view after west's relabel: region %q, want eu", got)
	}

	// A client that saw resourceVersion 10 before the re-rendering resumes from 10: it gets it.
	resumed := mustWatch(t, s, "west", WatchOptions{ResourceVersion: 10})
	expect(t, resumed, "MODIFIED o@10")
	// A watch from now replays nothing.
	fresh := mustWatch(t, s, "west", WatchOptions{})
	expectNothing(t, fresh)

	// The next source event is seen by both, with the new rendering.
	mustUpdate(t, s, cm("ns", "o", 11, locs("east", "west"), "d:replicas=11"))
	expect(t, east, "MODIFIED o@11")
	expect(t, west, "MODIFIED o@11")
	expect(t, resumed, "MODIFIED o@11")
	expect(t, fresh, "MODIFIED o@11")
	if got := regionIn(t, s, "west", "o"); got != "ap" {
		t.Errorf("west's view after an update: region %q, want ap", got)
	}

	// Rules that no longer select the object: its views show it as it is.
	s.SetRules(rules(t, c, 3, "ap"))
	expect(t, east, "MODIFIED o@11")
	expect(t, west, "MODIFIED o@11")
	if got := regionIn(t, s, "east", "o"); got != "" {
		t.Errorf("east's view without Customizations: region %q, want none", got)
	}
}

// TestFailingCustomizationNeverDeletes (issue 14 item 4): rules that fail on objects keep every
// view's last rendering (no event), withhold objects that never rendered (503, not 404), and
// report each failing (object, location) with its Customization; fixing them shows everything.
func TestFailingCustomizationNeverDeletes(t *testing.T) {
	c := customization.NewCompiler(customization.Options{PlainCluster: "root"})
	s := newTestStore(t, StoreOptions{})
	s.SetRules(rules(t, c, 1, "us", regionRule("")))
	mustReplace(t, s, 10, cm("ns", "o", 10, locs("east", "west"), "d:replicas=10"))
	east := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10})

	// A runtime error: the label does not exist.
	s.SetRules(rules(t, c, 2, "us", regionRule(`location.metadata.labels["zone"]`)))
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

	s.SetRules(rules(t, c, 3, "us", regionRule("")))
	expect(t, east, "ADDED p@11")
	if len(s.RenderFailures()) != 0 {
		t.Errorf("failures left after the fix: %+v", s.RenderFailures())
	}
	if got := regionIn(t, s, "east", "p"); got != "eu" {
		t.Errorf("east's view of p after the fix: region %q, want eu", got)
	}
}
