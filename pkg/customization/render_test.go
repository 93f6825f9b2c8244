package customization

import (
	"context"
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// regionEnvJSONPatch adds REGION=<the location's region label> to the first container.
const regionEnvJSONPatch = `[JSONPatch{op: "add", path: "/spec/template/spec/containers/0/env/-",
  value: Object.spec.template.spec.containers.env{name: "REGION", value: location.metadata.labels["region"]}}]`

// regionEnvApply sets REGION=<the location's region label> in container app, merged by the
// schema's list keys (containers by name, env by name).
const regionEnvApply = `Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{
  containers: [Object.spec.template.spec.containers{name: "app",
    env: [Object.spec.template.spec.containers.env{name: "REGION", value: location.metadata.labels["region"]}]}]}}}}`

// TestEnvFromLocationLabel: each location's rendering gets REGION from its own SyncTarget's
// region label, with JSONPatch and with ApplyConfiguration; MODE and the other container stay,
// and the input object is not changed.
func TestEnvFromLocationLabel(t *testing.T) {
	for name, m := range map[string]admissionregistrationv1.Mutation{
		"JSONPatch":          jsonPatch(regionEnvJSONPatch),
		"ApplyConfiguration": applyConfiguration(regionEnvApply),
	} {
		t.Run(name, func(t *testing.T) {
			s := snapshot(t, customization("region-env", m))
			in := deployment()
			for loc, want := range map[string]string{"east": "eu", "north": "eu", "west": "us"} {
				out := render(t, s, in, loc)
				app := container(t, out, "app")
				if got, ok := env(app, "REGION"); !ok || got != want {
					t.Errorf("%s: REGION = %q (present %v), want %q", loc, got, ok, want)
				}
				if got, _ := env(app, "MODE"); got != "prod" {
					t.Errorf("%s: MODE = %q, want prod (kept)", loc, got)
				}
				if img := container(t, out, "sidecar")["image"]; img != "registry.example/proxy:2.1" {
					t.Errorf("%s: sidecar image changed to %v", loc, img)
				}
			}
			if !reflect.DeepEqual(in, deployment()) {
				t.Errorf("Render changed its input")
			}
		})
	}
}

// TestImageRegistryPerRegion: a variable picks the region's registry and a JSONPatch over all
// containers (transformList) rewrites every image's registry.
func TestImageRegistryPerRegion(t *testing.T) {
	c := customization("registry", jsonPatch(`object.spec.template.spec.containers.transformList(i, c,
	  JSONPatch{op: "replace", path: "/spec/template/spec/containers/" + string(i) + "/image",
	    value: variables.registry + c.image.substring(c.image.indexOf("/"))})`))
	c.Spec.Variables = []admissionregistrationv1.Variable{{Name: "registry",
		Expression: `location.metadata.labels["region"] == "eu" ? "registry.eu.example" : "registry.us.example"`}}
	s := snapshot(t, c)
	for loc, want := range map[string][2]string{
		"east": {"registry.eu.example/web:1.0", "registry.eu.example/proxy:2.1"},
		"west": {"registry.us.example/web:1.0", "registry.us.example/proxy:2.1"},
	} {
		out := render(t, s, deployment(), loc)
		if got := [2]interface{}{container(t, out, "app")["image"], container(t, out, "sidecar")["image"]}; got != [2]interface{}{want[0], want[1]} {
			t.Errorf("%s: images %v, want %v", loc, got, want)
		}
	}
}

// TestMatchConditions: a Customization whose matchConditions do not all hold leaves the object
// unchanged for that location; one whose condition errs fails the rendering.
func TestMatchConditions(t *testing.T) {
	c := customization("edge-only", jsonPatch(`[JSONPatch{op: "replace", path: "/spec/replicas", value: 1}]`))
	c.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{
		{Name: "edge", Expression: `"tier" in location.metadata.labels && location.metadata.labels["tier"] == "edge"`},
		{Name: "edge-optional", Expression: `location.metadata.labels[?"tier"].orValue("") == "edge"`},
		{Name: "scaled", Expression: `object.spec.replicas > 1`},
	}
	s := snapshot(t, c)
	if got := render(t, s, deployment(), "north").Object["spec"].(map[string]interface{})["replicas"]; got != int64(1) {
		t.Errorf("north (tier edge): replicas %v, want 1", got)
	}
	if got := render(t, s, deployment(), "east").Object["spec"].(map[string]interface{})["replicas"]; got != int64(2) {
		t.Errorf("east (no tier): replicas %v, want 2 (unchanged)", got)
	}

	c.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "tier", Expression: `location.metadata.labels["tier"] == "edge"`}}
	re := renderError(t, snapshot(t, c), deployment(), "east") // east has no tier label: no such key
	if re.Reason != ReasonMatchConditionFailed || re.Customization != "edge-only" || !strings.Contains(re.Error(), "no such key") {
		t.Errorf("got %v (reason %s), want %s naming edge-only and the missing key", re, re.Reason, ReasonMatchConditionFailed)
	}
}

// TestNameOrder: Customizations apply in name order whatever their order in the list, each
// seeing the previous one's result.
func TestNameOrder(t *testing.T) {
	second := customization("b-second", jsonPatch(`[JSONPatch{op: "add", path: "/metadata/annotations/order",
	  value: object.metadata.annotations["order"] + ",b"}]`))
	first := customization("a-first", jsonPatch(`[JSONPatch{op: "add", path: "/metadata/annotations/order", value: "a"}]`))
	out := render(t, snapshot(t, second, first), deployment(), "east")
	if got := out.GetAnnotations()["order"]; got != "a,b" {
		t.Errorf("order annotation %q, want \"a,b\"", got)
	}
}

// TestSpecDiffAfterCustomizations: the object's own spec-diff.kcp.io/<location> patch applies
// after the Customizations (it can test what they wrote), the Customizations do not see any
// spec-diff annotation, and the result carries none.
func TestSpecDiffAfterCustomizations(t *testing.T) {
	c := customization("replicas", jsonPatch(`[JSONPatch{op: "replace", path: "/spec/replicas",
	  value: object.metadata.annotations.exists(k, k.startsWith("spec-diff.kcp.io/")) ? 100 : 3}]`))
	in := deployment()
	ann := in.GetAnnotations()
	ann[contract.SpecDiffAnnotation("east")] = `[{"op":"test","path":"/spec/replicas","value":3},{"op":"replace","path":"/spec/replicas","value":5}]`
	ann[contract.SpecDiffAnnotation("west")] = `[{"op":"replace","path":"/spec/replicas","value":7}]`
	in.SetAnnotations(ann)
	s := snapshot(t, c)
	for loc, want := range map[string]int64{"east": 5, "west": 7, "north": 3} {
		out := render(t, s, in, loc)
		if got := out.Object["spec"].(map[string]interface{})["replicas"]; got != want {
			t.Errorf("%s: replicas %v, want %d", loc, got, want)
		}
		for k := range out.GetAnnotations() {
			if strings.HasPrefix(k, contract.SpecDiffAnnotationPrefix) {
				t.Errorf("%s: rendering shows %s", loc, k)
			}
		}
	}
	// Without Customizations (Empty, and a nil snapshot) the patch still applies.
	for _, s := range []*Snapshot{Empty(), nil} {
		out, err := s.Render(context.Background(), deploymentsGVR, "default", in, "west")
		if err != nil || out.Object["spec"].(map[string]interface{})["replicas"] != int64(7) {
			t.Errorf("%v snapshot: %v, %v; want replicas 7", s, err, out)
		}
	}
	// A patch that does not apply is a RenderError naming no Customization.
	ann[contract.SpecDiffAnnotation("east")] = `[{"op":"replace","path":"/spec/nothing/here","value":1}]`
	in.SetAnnotations(ann)
	re := renderError(t, s, in, "east")
	if re.Reason != ReasonSpecDiffFailed || re.Customization != "" || !strings.Contains(re.Error(), "spec-diff.kcp.io/east") {
		t.Errorf("got %v (reason %s), want %s naming the annotation", re, re.Reason, ReasonSpecDiffFailed)
	}
}

// TestCompileErrors: a Customization that does not compile is reported with the field, kept,
// and fails every object it selects (and only those) instead of leaving them unchanged.
func TestCompileErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		mutation admissionregistrationv1.Mutation
		field    string
	}{
		"syntax":             {jsonPatch(`[JSONPatch{op: "add", path: "/x", value: `), "spec.mutations[0].jsonPatch.expression"},
		"misspelt location":  {jsonPatch(`[JSONPatch{op: "add", path: "/x", value: location.metadata.lables}]`), "spec.mutations[0].jsonPatch.expression"},
		"no authorizer":      {jsonPatch(`authorizer.group("").resource("pods").check("get").allowed() ? [] : []`), "spec.mutations[0].jsonPatch.expression"},
		"wrong return type":  {applyConfiguration(`"not an object"`), "spec.mutations[0].applyConfiguration.expression"},
		"field of the other": {admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeJSONPatch, ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: "Object{}"}}, "spec.mutations[0]"},
	} {
		t.Run(name, func(t *testing.T) {
			broken := customization("broken", tc.mutation)
			broken.Spec.LocationNames = []string{"east"}
			s, errs := NewCompiler(Options{PlainCluster: "default"}).Snapshot(1, []*controlv1alpha1.Customization{broken}, locations)
			if len(errs) != 1 || errs[0].Field != tc.field || errs[0].Name != "broken" {
				t.Fatalf("compile errors %v, want one on %s", errs, tc.field)
			}
			re := renderError(t, s, deployment(), "east")
			t.Log(re)
			if re.Reason != ReasonCompilationFailed || re.Customization != "broken" || !strings.Contains(re.Error(), tc.field) {
				t.Errorf("got %v (reason %s), want %s naming broken and %s", re, re.Reason, ReasonCompilationFailed, tc.field)
			}
			// west is not selected: it renders.
			if _, err := s.Render(context.Background(), deploymentsGVR, "default", deployment(), "west"); err != nil {
				t.Errorf("west (not selected): %v", err)
			}
		})
	}
}

// TestRuntimeErrors: an expression that fails at runtime, exceeds the cost limit, produces a
// patch that does not apply, or changes the object's identity fails the rendering with a
// RenderError naming the Customization and the mutation.
func TestRuntimeErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		mutation admissionregistrationv1.Mutation
		reason   string
		want     string
	}{
		"missing label": {jsonPatch(`[JSONPatch{op: "add", path: "/metadata/labels/tier", value: location.metadata.labels["tier"]}]`),
			ReasonMutationFailed, "no such key"},
		"per-call cost limit": {jsonPatch(`[JSONPatch{op: "add", path: "/metadata/labels/x",
		  value: string(lists.range(2000).all(i, lists.range(2000).all(j, i + j >= 0)))}]`),
			ReasonMutationFailed, "cost"},
		"patch does not apply": {jsonPatch(`[JSONPatch{op: "replace", path: "/spec/absent/field", value: 1}]`),
			ReasonMutationFailed, "JSON Patch"},
		"renames the object": {jsonPatch(`[JSONPatch{op: "replace", path: "/metadata/name", value: "other"}]`),
			ReasonProtectedFieldChanged, "/metadata/name"},
		"writes status": {applyConfiguration(`Object{status: Object.status{replicas: 1}}`),
			ReasonProtectedFieldChanged, "/status"},
	} {
		t.Run(name, func(t *testing.T) {
			s := snapshot(t, customization("failing", tc.mutation))
			re := renderError(t, s, deployment(), "east")
			t.Log(re)
			if re.Reason != tc.reason || re.Customization != "failing" || !strings.Contains(re.Error(), tc.want) {
				t.Errorf("got %q (reason %s), want reason %s and %q", re.Error(), re.Reason, tc.reason, tc.want)
			}
		})
	}
}

// TestApplyConfigurationWithoutSchema: without type converters an ApplyConfiguration fails with
// a clear error rather than merging lists atomically.
func TestApplyConfigurationWithoutSchema(t *testing.T) {
	s, errs := NewCompiler(Options{PlainCluster: "default"}).Snapshot(1, []*controlv1alpha1.Customization{customization("ac", applyConfiguration(regionEnvApply))}, locations)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if re := renderError(t, s, deployment(), "east"); re.Reason != ReasonMutationFailed || !strings.Contains(re.Error(), "no schema") {
		t.Errorf("got %v, want %s with no schema", re, ReasonMutationFailed)
	}
}

// TestSelection: objects of another namespace, another logical cluster, another resource or
// without the selected labels are neither touched nor changed; locations are selected by
// labels and names together.
func TestSelection(t *testing.T) {
	c := customization("sel", jsonPatch(`[JSONPatch{op: "replace", path: "/spec/replicas", value: 9}]`))
	c.Spec.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	c.Spec.LocationSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}
	c.Spec.LocationNames = []string{"north", "west"}
	s := snapshot(t, c)
	ctx := context.Background()
	replicas := func(u *unstructured.Unstructured) interface{} {
		return u.Object["spec"].(map[string]interface{})["replicas"]
	}

	for _, tc := range []struct {
		name    string
		gvr     schema.GroupVersionResource
		cluster string
		obj     func() *unstructured.Unstructured
		loc     string
		want    bool
	}{
		{"selected", deploymentsGVR, "default", deployment, "north", true},
		{"location not named", deploymentsGVR, "default", deployment, "east", false},
		{"location named, wrong region", deploymentsGVR, "default", deployment, "west", false},
		{"unregistered location", deploymentsGVR, "default", deployment, "nowhere", false},
		{"other cluster", deploymentsGVR, "other", deployment, "north", false},
		{"other resource", appsV1.WithResource("statefulsets"), "default", deployment, "north", false},
		{"other namespace", deploymentsGVR, "default", func() *unstructured.Unstructured { u := deployment(); u.SetNamespace("other"); return u }, "north", false},
		{"other labels", deploymentsGVR, "default", func() *unstructured.Unstructured {
			u := deployment()
			u.SetLabels(map[string]string{"app": "db"})
			return u
		}, "north", false},
	} {
		if got := s.Touches(tc.gvr, tc.cluster, tc.obj(), tc.loc); got != tc.want {
			t.Errorf("%s: Touches = %v, want %v", tc.name, got, tc.want)
		}
		out, err := s.Render(ctx, tc.gvr, tc.cluster, tc.obj(), tc.loc)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if changed := replicas(out) == int64(9); changed != tc.want {
			t.Errorf("%s: changed = %v, want %v", tc.name, changed, tc.want)
		}
	}
}

// TestRenderNeverPanics: objects of every odd shape render or fail with an error.
func TestRenderNeverPanics(t *testing.T) {
	s := snapshot(t, customization("env", jsonPatch(regionEnvJSONPatch)), customization("ac", applyConfiguration(regionEnvApply)))
	odd := []map[string]interface{}{
		{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]interface{}{"name": "x", "namespace": "apps"}},
		{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]interface{}{"name": "x", "namespace": "apps"}, "spec": "a string"},
		{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]interface{}{"name": "x", "namespace": "apps"},
			"spec": map[string]interface{}{"template": map[string]interface{}{"spec": map[string]interface{}{"containers": []interface{}{"not a map", nil}}}}},
		{"kind": "Deployment", "metadata": map[string]interface{}{"name": "x", "namespace": "apps", "annotations": map[string]interface{}{"spec-diff.kcp.io/east": "{"}}},
	}
	for i, o := range odd {
		out, err := s.Render(context.Background(), deploymentsGVR, "default", &unstructured.Unstructured{Object: o}, "east")
		if err == nil && out == nil {
			t.Errorf("object %d: neither an object nor an error", i)
		}
	}
}

// TestRenderConcurrently: one snapshot renders from several goroutines at once (views render
// in parallel); run with -race.
func TestRenderConcurrently(t *testing.T) {
	s := snapshot(t, customization("env", jsonPatch(regionEnvJSONPatch)), customization("ac", applyConfiguration(regionEnvApply)))
	in := deployment()
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		loc := locations[i%len(locations)].Name
		go func() {
			var err error
			for j := 0; j < 20 && err == nil; j++ {
				_, err = s.Render(context.Background(), deploymentsGVR, "default", in, loc)
			}
			errs <- err
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
