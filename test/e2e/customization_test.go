package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// regionEnvRegistryCustomization is a Customization apps/region, TestCustomization's: every
// Deployment of apps gets REGION=<its location's region label> in its container "app" (an
// ApplyConfiguration, merged by the schema's list keys), and every image is pulled from
// <region>.registry.example (a JSONPatch). regionExpr is the CEL expression of the region.
func regionEnvRegistryCustomization(regionExpr string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": controlv1alpha1.SchemeGroupVersion.String(), "kind": "Customization",
		"metadata": map[string]interface{}{"name": "region", "namespace": "apps"},
		"spec": map[string]interface{}{
			"resources": []interface{}{map[string]interface{}{
				"apiGroups": []interface{}{"apps"}, "apiVersions": []interface{}{"v1"}, "resources": []interface{}{"deployments"}}},
			"variables": []interface{}{map[string]interface{}{"name": "region", "expression": regionExpr}},
			"mutations": []interface{}{
				map[string]interface{}{"patchType": "ApplyConfiguration", "applyConfiguration": map[string]interface{}{"expression": `Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{
  containers: [Object.spec.template.spec.containers{name: "app",
    env: [Object.spec.template.spec.containers.env{name: "REGION", value: variables.region}]}]}}}}`}},
				map[string]interface{}{"patchType": "JSONPatch", "jsonPatch": map[string]interface{}{"expression": `object.spec.template.spec.containers.transformList(i, c,
  JSONPatch{op: "replace", path: "/spec/template/spec/containers/" + string(i) + "/image",
    value: variables.region + ".registry.example" + c.image.substring(c.image.indexOf("/"))})`}},
			},
		},
	}}
}

// startRegionsEnv starts the environment of the Customization tests: mapper-apiserver mirroring
// Deployments, the source namespace apps, and three locations whose SyncTargets are labelled
// region=eu (east, north) or region=us (west). It returns the environment and the regions.
func startRegionsEnv(t *testing.T, ctx context.Context) (*locationsEnv, map[string]string) {
	t.Helper()
	env := startLocationsEnvFor(t, ctx, "deployments.apps", "east", "north", "west")
	ensureNamespace(t, ctx, env.src, "apps")
	regions := map[string]string{"east": "eu", "north": "eu", "west": "us"}
	for l, r := range regions {
		setRegion(t, ctx, env, l, r)
	}
	return env, regions
}

// setRegion labels location's SyncTarget region=region.
func setRegion(t *testing.T, ctx context.Context, env *locationsEnv, location, region string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{"region":%q}}}`, region)
	if _, err := env.dyn.Resource(synctarget.Resource).Patch(ctx, location, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("labelling %s region=%s: %v", location, region, err)
	}
}

// TestCustomization ("Tests"): three SyncTargets labelled region=eu or us, a
// Customization that sets REGION from the location's region label and rewrites image
// registries per region, on real servers with three mappers:
//   - each view shows its own variant, and each target gets it;
//   - mapper-controller writes the Customization's status: 3 selected (object, location) pairs;
//     a Customization whose objectSelector selects nothing is Ready with NoObjectsSelected;
//   - relabelling a SyncTarget re-renders its view, and its target follows within seconds;
//   - a broken CEL expression (a runtime error, then a compile error) sets the Customization's
//     Ready condition False with the failing objects, while every view and target keeps the last
//     rendering: nothing is deleted anywhere; the fix brings everything back.
func TestCustomization(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	env, regions := startRegionsEnv(t, ctx)
	custs := env.src.Resource(customization.Resource).Namespace("apps")
	if _, err := custs.Create(ctx, regionEnvRegistryCustomization(`location.metadata.labels["region"]`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deployments := env.src.Resource(deploymentsGVR).Namespace("apps")
	if _, err := deployments.Create(ctx, newDeployment("apps", "web", "east", "north", "west"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for l := range regions {
		env.startMapper(t, "mapper-"+l, l, nil, locationMapperArgs...)
	}
	// mapper-controller writes the Customizations' status, from the failures mapper-apiserver's
	// `locations` report (through the source's aggregator).
	framework.StartMapperController(t, ctx, env.source, time.Minute, "--controllers=customizationstatus")

	// variant returns REGION and the first image of a Deployment, "" when absent.
	variant := func(obj *unstructured.Unstructured) (region, image string) {
		containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		if len(containers) == 0 {
			return "", ""
		}
		c, _ := containers[0].(map[string]interface{})
		image, _ = c["image"].(string)
		env, _ := c["env"].([]interface{})
		for _, e := range env {
			if m, _ := e.(map[string]interface{}); m["name"] == "REGION" {
				region, _ = m["value"].(string)
			}
		}
		return region, image
	}
	want := func(region string) string {
		return region + "/" + region + ".registry.example/app:1"
	}
	onTarget := func(location string) string {
		obj := env.targetObject(t, ctx, location, deploymentsGVR, "apps", "web")
		if obj == nil {
			return "absent"
		}
		r, i := variant(obj)
		return r + "/" + i
	}
	waitTarget := func(location, wantVariant string) {
		t.Helper()
		mapperEventually(t, ctx, 90*time.Second, fmt.Sprintf("%s's copy of web is %s", location, wantVariant), func() (bool, string) {
			got := onTarget(location)
			return got == wantVariant, got
		})
	}
	inView := func(location string) string {
		obj, err := viewClient(t, env.viewKubeconfig[location]).Resource(deploymentsGVR).Namespace("apps").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return "error: " + err.Error()
		}
		r, i := variant(obj)
		return r + "/" + i
	}

	t.Run("each view and target shows its own variant", func(t *testing.T) {
		for l, r := range regions {
			waitTarget(l, want(r))
			if got := inView(l); got != want(r) {
				t.Errorf("%s's view shows %s, want %s", l, got, want(r))
			}
		}
	})

	t.Run("the status counts the selected pairs, and says when there are none", func(t *testing.T) {
		st := waitCustomizationCondition(t, ctx, custs, "region", controlv1alpha1.CustomizationReady, "True", controlv1alpha1.ReasonAllObjectsRendered)
		if st.SelectedObjects == nil || *st.SelectedObjects != 3 {
			t.Errorf("selectedObjects %v, want 3 (web for each location)", st.SelectedObjects)
		}
		// A Customization whose objectSelector matches no object.
		typo := regionEnvRegistryCustomization(`location.metadata.labels["region"]`)
		typo.SetName("typo")
		_ = unstructured.SetNestedStringMap(typo.Object, map[string]string{"app": "wbe"}, "spec", "objectSelector", "matchLabels")
		if _, err := custs.Create(ctx, typo, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		st = waitCustomizationCondition(t, ctx, custs, "typo", controlv1alpha1.CustomizationReady, "True", controlv1alpha1.ReasonNoObjectsSelected)
		if st.SelectedObjects == nil || *st.SelectedObjects != 0 {
			t.Errorf("selectedObjects %v, want 0", st.SelectedObjects)
		}
		// Written by mapper-controller.
		u, err := custs.Get(ctx, "typo", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		writers := []string{}
		for _, m := range u.GetManagedFields() {
			if m.Subresource == "status" {
				writers = append(writers, m.Manager)
			}
		}
		if strings.Join(writers, ",") != "mapper-controller-customization-status" {
			t.Errorf("the status was written by %v, want mapper-controller-customization-status alone", writers)
		}
		if err := custs.Delete(ctx, "typo", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("relabelling a SyncTarget re-renders its view and target", func(t *testing.T) {
		setRegion(t, ctx, env, "west", "ap")
		start := time.Now()
		waitTarget("west", want("ap"))
		t.Logf("west's target followed the relabel in %v", time.Since(start).Round(100*time.Millisecond))
		if got := inView("west"); got != want("ap") {
			t.Errorf("west's view shows %s, want %s", got, want("ap"))
		}
		for _, l := range []string{"east", "north"} {
			if got := onTarget(l); got != want("eu") {
				t.Errorf("%s's copy changed with west's relabel: %s", l, got)
			}
		}
		regions["west"] = "ap"
	})

	waitCondition := func(t *testing.T, condType, status, reason string) controlv1alpha1.CustomizationStatus {
		t.Helper()
		return waitCustomizationCondition(t, ctx, custs, "region", condType, status, reason)
	}
	setRegionExpr := func(t *testing.T, expr string) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"variables":[{"name":"region","expression":%q}]}}`, expr)
		if _, err := custs.Patch(ctx, "region", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// unchanged checks that every view and target still shows the last rendering.
	unchanged := func(t *testing.T) {
		t.Helper()
		for l, r := range regions {
			if got := onTarget(l); got != want(r) {
				t.Errorf("%s's copy: %s, want the last rendering %s", l, got, want(r))
			}
			if got := inView(l); got != want(r) {
				t.Errorf("%s's view: %s, want the last rendering %s", l, got, want(r))
			}
		}
	}

	t.Run("a broken CEL expression deletes nothing and is reported", func(t *testing.T) {
		waitCondition(t, controlv1alpha1.CustomizationReady, "True", controlv1alpha1.ReasonAllObjectsRendered)

		// A runtime error: the label does not exist on any SyncTarget.
		setRegionExpr(t, `location.metadata.labels["zone"]`)
		st := waitCondition(t, controlv1alpha1.CustomizationReady, "False", controlv1alpha1.ReasonRenderFailed)
		if st.FailingObjects != 3 || len(st.Failures) != 3 {
			t.Errorf("failingObjects %d, failures %+v; want 3 (web for each location)", st.FailingObjects, st.Failures)
		}
		for _, f := range st.Failures {
			if f.Resource != "deployments.apps" || f.Name != "apps/web" || f.Reason == "" || !strings.Contains(f.Message, "zone") {
				t.Errorf("failure %+v does not name deployments.apps apps/web and the missing label", f)
			}
		}
		unchanged(t)

		// A source change while the rules fail: the views keep the last rendering.
		if _, err := deployments.Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		// A compile error.
		setRegionExpr(t, `location.metadata.labels["region"] +`)
		waitCondition(t, controlv1alpha1.CustomizationCompiled, "False", controlv1alpha1.ReasonCompilationFailed)
		waitCondition(t, controlv1alpha1.CustomizationReady, "False", controlv1alpha1.ReasonCompilationFailed)
		unchanged(t)
		for l := range regions {
			if obj := env.targetObject(t, ctx, l, deploymentsGVR, "apps", "web"); obj != nil {
				if r, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); r == 3 {
					t.Errorf("%s's copy took the source's change although it cannot render", l)
				}
			}
		}

		// The fix renders everything again, with the source's change.
		setRegionExpr(t, `location.metadata.labels["region"]`)
		waitCondition(t, controlv1alpha1.CustomizationReady, "True", controlv1alpha1.ReasonAllObjectsRendered)
		waitCondition(t, controlv1alpha1.CustomizationCompiled, "True", controlv1alpha1.ReasonCompiled)
		for l := range regions {
			mapperEventually(t, ctx, 90*time.Second, l+"'s copy of web has 3 replicas", func() (bool, string) {
				obj := env.targetObject(t, ctx, l, deploymentsGVR, "apps", "web")
				if obj == nil {
					return false, "absent"
				}
				r, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
				return r == 3, fmt.Sprintf("replicas %d", r)
			})
		}
		unchanged(t)
	})
}

// waitCustomizationCondition waits (at most a minute) until the Customization name of ri has the
// condition condType with status and reason for its current generation (status.observedGeneration),
// i.e. until mapper-controller's status writer has described it, and returns its status.
func waitCustomizationCondition(t *testing.T, ctx context.Context, ri dynamic.ResourceInterface, name, condType, status, reason string) controlv1alpha1.CustomizationStatus {
	t.Helper()
	var got controlv1alpha1.CustomizationStatus
	mapperEventually(t, ctx, 60*time.Second, fmt.Sprintf("Customization %s's %s condition is %s (%s)", name, condType, status, reason), func() (bool, string) {
		u, err := ri.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var c controlv1alpha1.Customization
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
			return false, err.Error()
		}
		got = c.Status
		for _, cond := range c.Status.Conditions {
			if cond.Type == condType {
				return string(cond.Status) == status && cond.Reason == reason && c.Status.ObservedGeneration == c.Generation,
					fmt.Sprintf("%s %s: %s (observedGeneration %d of %d)", cond.Status, cond.Reason, cond.Message, c.Status.ObservedGeneration, c.Generation)
			}
		}
		return false, "no condition"
	})
	return got
}
