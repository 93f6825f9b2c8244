package customization

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// euEnv is a Customization of the web Deployments for the locations in region eu.
func euEnv() *controlv1alpha1.Customization {
	c := customization("eu-env", jsonPatch(regionEnvJSONPatch))
	c.Spec.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	c.Spec.LocationSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}
	return c
}

// db is a Deployment that euEnv does not select.
func db() *unstructured.Unstructured {
	u := deployment()
	u.SetName("db")
	u.SetLabels(map[string]string{"app": "db"})
	return u
}

// TestDiffersOnRelabel: relabelling locations makes Differs true exactly for the objects a
// Customization selects there (before or after), and compiles nothing again.
func TestDiffersOnRelabel(t *testing.T) {
	c := NewCompiler(Options{PlainCluster: "default"})
	before, _ := c.Snapshot(10, []*controlv1alpha1.Customization{euEnv()}, locations)
	relabelled := []Location{
		{Name: "east", Labels: map[string]string{"region": "eu", "zone": "a"}}, // still selected, labels changed
		locations[1], // north unchanged
		{Name: "west", Labels: map[string]string{"region": "eu"}}, // now selected
	}
	after, _ := c.Snapshot(11, []*controlv1alpha1.Customization{euEnv()}, relabelled)
	if after.ResourceVersion() != 11 {
		t.Errorf("ResourceVersion %d, want 11", after.ResourceVersion())
	}
	if before.scopes[scope{"default", "apps"}][0] != after.scopes[scope{"default", "apps"}][0] {
		t.Errorf("an unchanged Customization was compiled again")
	}
	for _, tc := range []struct {
		obj  func() *unstructured.Unstructured
		loc  string
		want bool
	}{
		{deployment, "east", true},
		{deployment, "north", false},
		{deployment, "west", true},
		{db, "east", false},
		{db, "north", false},
		{db, "west", false},
	} {
		if got := after.Differs(before, deploymentsGVR, "default", tc.obj().GetNamespace(), labels.Set(tc.obj().GetLabels()), tc.loc); got != tc.want {
			t.Errorf("%s for %s: Differs = %v, want %v", tc.obj().GetName(), tc.loc, got, tc.want)
		}
	}
	// The renderings agree with Differs: west's REGION appears, north's is the same.
	for loc, want := range map[string]bool{"west": true, "north": false} {
		b, _ := before.Render(context.Background(), deploymentsGVR, "default", deployment(), loc)
		a, _ := after.Render(context.Background(), deploymentsGVR, "default", deployment(), loc)
		if changed := !equalObjects(a, b); changed != want {
			t.Errorf("%s: rendering changed %v, want %v", loc, changed, want)
		}
	}
}

// TestDiffersOnSpecChange: a changed, added or removed Customization differs for the objects
// it selects and for no other; the same snapshot, and a recompiled identical spec, do not.
func TestDiffersOnSpecChange(t *testing.T) {
	c := NewCompiler(Options{PlainCluster: "default"})
	s1, _ := c.Snapshot(1, []*controlv1alpha1.Customization{euEnv()}, locations)
	changed := euEnv()
	changed.Spec.Mutations = append(changed.Spec.Mutations, jsonPatch(`[JSONPatch{op: "replace", path: "/spec/replicas", value: 1}]`))
	s2, _ := c.Snapshot(2, []*controlv1alpha1.Customization{changed}, locations)
	s3, _ := NewCompiler(Options{PlainCluster: "default"}).Snapshot(3, []*controlv1alpha1.Customization{changed}, locations)
	for _, tc := range []struct {
		name     string
		now, old Rules
		obj      *unstructured.Unstructured
		loc      string
		want     bool
	}{
		{"changed spec", s2, s1, deployment(), "east", true},
		{"changed spec, other object", s2, s1, db(), "east", false},
		{"changed spec, location not selected", s2, s1, deployment(), "west", false},
		{"same snapshot", s2, s2, deployment(), "east", false},
		{"same spec compiled twice", s3, s2, deployment(), "east", false},
		{"added (from nil)", s1, nil, deployment(), "east", true},
		{"added (from Empty)", s1, Empty(), deployment(), "east", true},
		{"removed", Empty(), s1, deployment(), "east", true},
		{"nothing selects", s1, nil, db(), "east", false},
	} {
		now := tc.now.(*Snapshot)
		if got := now.Differs(tc.old, deploymentsGVR, "default", tc.obj.GetNamespace(), labels.Set(tc.obj.GetLabels()), tc.loc); got != tc.want {
			t.Errorf("%s: Differs = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestNoSelectionAllocatesNothing: Differs against no rules and Touches allocate nothing for an
// object that no Customization selects, at a location with or without SyncTarget: the cache asks
// Differs for every location of every object it stores from bytes, and preparing each location
// (its label set and CEL value) was most of the garbage of a first sync (bench scenario 4).
func TestNoSelectionAllocatesNothing(t *testing.T) {
	s, _ := NewCompiler(Options{PlainCluster: "default"}).Snapshot(1, []*controlv1alpha1.Customization{euEnv()}, locations)
	obj := db()
	objLabels := labels.Set(obj.GetLabels())
	for _, loc := range []string{"east", "no-synctarget"} {
		if n := testing.AllocsPerRun(100, func() {
			if s.Differs(nil, deploymentsGVR, "default", obj.GetNamespace(), objLabels, loc) {
				t.Fatalf("Differs for %s: true, want false", loc)
			}
		}); n != 0 {
			t.Errorf("Differs against no rules for %s: %v allocations, want 0", loc, n)
		}
		if n := testing.AllocsPerRun(100, func() {
			if s.Touches(deploymentsGVR, "default", obj, loc) {
				t.Fatalf("Touches for %s: true, want false", loc)
			}
		}); n != 0 {
			t.Errorf("Touches for %s: %v allocations, want 0", loc, n)
		}
	}
}

// TestTouchesSpecDiff: an object's own spec-diff patch touches it for that location only.
func TestTouchesSpecDiff(t *testing.T) {
	u := db()
	ann := u.GetAnnotations()
	ann[contract.SpecDiffAnnotation("west")] = `[{"op":"replace","path":"/spec/replicas","value":1}]`
	u.SetAnnotations(ann)
	s := snapshot(t, euEnv())
	for loc, want := range map[string]bool{"west": true, "east": false} {
		if got := s.Touches(deploymentsGVR, "default", u, loc); got != want {
			t.Errorf("%s: Touches = %v, want %v", loc, got, want)
		}
		if got := Empty().Touches(deploymentsGVR, "default", u, loc); got != want {
			t.Errorf("Empty, %s: Touches = %v, want %v", loc, got, want)
		}
	}
}

// TestKCPClusters: with a kcp source a Customization selects only objects of its own logical
// cluster (its kcp.io/cluster annotation); with a plain source the annotation is ignored.
func TestKCPClusters(t *testing.T) {
	c := euEnv()
	c.Annotations = map[string]string{contract.ClusterAnnotation: "team-a"}
	kcp, _ := NewSnapshot(1, []*controlv1alpha1.Customization{c}, locations)
	plain, _ := NewCompiler(Options{PlainCluster: "default"}).Snapshot(1, []*controlv1alpha1.Customization{c}, locations)
	for _, tc := range []struct {
		name    string
		s       *Snapshot
		cluster string
		want    bool
	}{
		{"kcp, own cluster", kcp, "team-a", true},
		{"kcp, other cluster", kcp, "team-b", false},
		{"plain, annotation ignored", plain, "default", true},
		{"plain, the annotation's cluster", plain, "team-a", false},
	} {
		if got := tc.s.Touches(deploymentsGVR, tc.cluster, deployment(), "east"); got != tc.want {
			t.Errorf("%s: Touches = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestLocation: Location returns a registered location's labels and only the name of an
// unregistered one.
func TestLocation(t *testing.T) {
	s := snapshot(t)
	if l := s.Location("west"); !l.Equal(locations[2]) {
		t.Errorf("west: %+v", l)
	}
	if l := s.Location("nowhere"); !l.Equal(Location{Name: "nowhere"}) {
		t.Errorf("nowhere: %+v", l)
	}
}

// equalObjects reports whether a and b have equal content.
func equalObjects(a, b *unstructured.Unstructured) bool {
	ja, _ := a.MarshalJSON()
	jb, _ := b.MarshalJSON()
	return string(ja) == string(jb)
}

// BenchmarkRender measures one rendering of a two-container Deployment for one location:
// without Customizations (a copy), with one JSONPatch Customization, with one
// ApplyConfiguration Customization, and with two (registry rewrite and env); and Touches.
func BenchmarkRender(b *testing.B) {
	registry := customization("registry", jsonPatch(`object.spec.template.spec.containers.transformList(i, c,
	  JSONPatch{op: "replace", path: "/spec/template/spec/containers/" + string(i) + "/image",
	    value: variables.registry + c.image.substring(c.image.indexOf("/"))})`))
	registry.Spec.Variables = []admissionregistrationv1.Variable{{Name: "registry",
		Expression: `location.metadata.labels["region"] == "eu" ? "registry.eu.example" : "registry.us.example"`}}
	ctx := context.Background()
	obj := deployment()
	for _, bc := range []struct {
		name string
		s    *Snapshot
	}{
		{"none", Empty()},
		{"jsonPatch", snapshot(b, customization("env", jsonPatch(regionEnvJSONPatch)))},
		{"applyConfiguration", snapshot(b, customization("env", applyConfiguration(regionEnvApply)))},
		{"registry+env", snapshot(b, registry, customization("z-env", jsonPatch(regionEnvJSONPatch)))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.s.Render(ctx, deploymentsGVR, "default", obj, "east"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	s := snapshot(b, registry, euEnv())
	b.Run("Touches", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s.Touches(deploymentsGVR, "default", obj, "west")
		}
	})
}

// BenchmarkCompile measures compiling one Customization (one JSONPatch mutation, one variable)
// into a new snapshot: what a changed Customization costs the follower.
func BenchmarkCompile(b *testing.B) {
	c := euEnv()
	c.Spec.Variables = []admissionregistrationv1.Variable{{Name: "region", Expression: `location.metadata.labels["region"]`}}
	b.ReportAllocs()
	for b.Loop() {
		if _, errs := NewCompiler(Options{}).Snapshot(1, []*controlv1alpha1.Customization{c}, locations); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}
