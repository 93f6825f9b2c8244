package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestCustomizationFollower runs customization.Follower against a real kube-apiserver: it
// syncs (empty) before the CRDs exist, then follows SyncTargets and Customizations installed
// from artifacts/crds; a JSONPatch and an ApplyConfiguration (with the kube-apiserver's own
// OpenAPI schema) render each location's region; a relabel and a broken expression arrive as
// new snapshots at the changes' resourceVersions, in order; a status-only update makes none.
func TestCustomizationFollower(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source"})
	dyn := dynamicClientFor(t, cp)
	disc, err := discovery.NewDiscoveryClientForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}

	f := customization.NewFollower(dyn, customization.FollowerOptions{Options: customization.Options{PlainCluster: "default"}, OpenAPI: disc.OpenAPIV3()})
	snapshots := make(chan *customization.Snapshot, 100)
	f.OnChange(func(s *customization.Snapshot) { snapshots <- s })
	go f.Run(ctx)
	var (
		last *customization.Snapshot
		seen = map[uint64]bool{} // the resourceVersions of the delivered snapshots
	)
	// next waits for a delivered snapshot satisfying cond, checking resourceVersion order.
	next := func(what string, cond func(*customization.Snapshot) bool) *customization.Snapshot {
		t.Helper()
		for {
			select {
			case s := <-snapshots:
				if last != nil && s.ResourceVersion() < last.ResourceVersion() {
					t.Fatalf("snapshot at resourceVersion %d delivered after %d", s.ResourceVersion(), last.ResourceVersion())
				}
				last = s
				seen[s.ResourceVersion()] = true
				if cond(s) {
					return s
				}
			case <-ctx.Done():
				t.Fatalf("no snapshot where %s", what)
			}
		}
	}
	next("the follower synced without the CRDs", func(s *customization.Snapshot) bool { return f.HasSynced() })

	framework.InstallControlCRDs(t, ctx, cp)
	framework.EnsureNamespace(t, ctx, cp, "apps")
	for name, region := range map[string]string{"east": "eu", "west": "us"} {
		if _, err := dyn.Resource(synctarget.Resource).Create(ctx, newSyncTarget(name, map[string]string{"region": region}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	custs := dyn.Resource(customization.Resource).Namespace("apps")
	created := createCustomization(t, ctx, custs, regionCustomization())
	// The CRD's CEL rule refuses a mutation whose field does not match its patchType.
	mismatched := regionCustomization()
	mismatched.Name = "mismatched"
	mismatched.Spec.Mutations[0].PatchType = admissionregistrationv1.PatchTypeApplyConfiguration
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(mismatched)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := custs.Create(ctx, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "exactly the field its patchType names") {
		t.Errorf("a mutation with the other patchType's field: want 422 from the CRD's rule, got %v", err)
	}
	web := webDeployment()
	region := func(s *customization.Snapshot, loc string) (string, error) {
		out, err := s.Render(ctx, customizationDeployments, "default", web, loc)
		if err != nil {
			return "", err
		}
		c := out.Object["spec"].(map[string]interface{})["template"].(map[string]interface{})["spec"].(map[string]interface{})["containers"].([]interface{})[0].(map[string]interface{})
		return fmt.Sprintf("%v/%v", out.GetAnnotations()["region"], c["env"]), nil
	}
	s := next("the Customization renders both locations", func(s *customization.Snapshot) bool {
		e, _ := region(s, "east")
		w, _ := region(s, "west")
		return e == "eu/[map[name:REGION value:eu]]" && w == "us/[map[name:REGION value:us]]"
	})
	if rv := parseResourceVersion(t, created); s.ResourceVersion() < rv {
		t.Errorf("snapshot resourceVersion %d is older than the Customization's %d", s.ResourceVersion(), rv)
	}

	// A status-only update of the Customization makes no snapshot: the next one is the spec
	// change made after it, at that change's resourceVersion.
	created.Object["status"] = map[string]interface{}{"failingObjects": int64(0), "observedGeneration": int64(1)}
	statusUpdated, err := custs.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	broken := regionCustomization()
	broken.Name = "z-broken"
	broken.Spec.Mutations = []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
		JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "add", path: "/x", value: location.metadata.lables}]`}}}
	brokenObj := createCustomization(t, ctx, custs, broken)
	s = next("the broken Customization is compiled", func(s *customization.Snapshot) bool { return len(s.CompileErrors()) > 0 })
	if statusRV := parseResourceVersion(t, statusUpdated); seen[statusRV] || s.ResourceVersion() != parseResourceVersion(t, brokenObj) {
		t.Errorf("snapshot at %d, want the broken Customization's %d; a snapshot at the status update's %d: %v", s.ResourceVersion(), parseResourceVersion(t, brokenObj), statusRV, seen[statusRV])
	}
	if e := s.CompileErrors()[0]; e.Name != "z-broken" || e.Field != "spec.mutations[0].jsonPatch.expression" || !strings.Contains(e.Err.Error(), "lables") {
		t.Errorf("compile error %v", e)
	}
	var re *customization.RenderError
	if _, err := s.Render(ctx, customizationDeployments, "default", web, "east"); !errors.As(err, &re) || re.Reason != customization.ReasonCompilationFailed || re.Customization != "z-broken" {
		t.Errorf("rendering with a broken Customization: %v, want a RenderError %s naming z-broken", err, customization.ReasonCompilationFailed)
	}
	if err := custs.Delete(ctx, "z-broken", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	before := next("the broken Customization is gone", func(s *customization.Snapshot) bool { return len(s.CompileErrors()) == 0 })

	// Relabel west: the next snapshot holds the change at its resourceVersion and renders eu.
	st, err := dyn.Resource(synctarget.Resource).Get(ctx, "west", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st.SetLabels(map[string]string{"region": "eu"})
	relabelled, err := dyn.Resource(synctarget.Resource).Update(ctx, st, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s = next("west is relabelled", func(s *customization.Snapshot) bool { return s.Location("west").Labels["region"] == "eu" })
	if s.ResourceVersion() != parseResourceVersion(t, relabelled) {
		t.Errorf("snapshot at %d, want the relabel's %d", s.ResourceVersion(), parseResourceVersion(t, relabelled))
	}
	if got, err := region(s, "west"); err != nil || got != "eu/[map[name:REGION value:eu]]" {
		t.Errorf("west after the relabel: %q, %v", got, err)
	}
	differs := func(loc string) bool {
		return s.Differs(before, customizationDeployments, "default", web.GetNamespace(), labels.Set(web.GetLabels()), loc)
	}
	if !differs("west") || differs("east") {
		t.Errorf("Differs after relabelling west: west %v (want true), east %v (want false)", differs("west"), differs("east"))
	}
}

// customizationDeployments is the resource of webDeployment.
var customizationDeployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// regionCustomization annotates web Deployments with the location's region (JSONPatch) and
// sets REGION in their first container (ApplyConfiguration, merged by the schema's list keys).
func regionCustomization() *controlv1alpha1.Customization {
	return &controlv1alpha1.Customization{
		TypeMeta:   metav1.TypeMeta{APIVersion: controlv1alpha1.SchemeGroupVersion.String(), Kind: "Customization"},
		ObjectMeta: metav1.ObjectMeta{Name: "region", Namespace: "apps"},
		Spec: controlv1alpha1.CustomizationSpec{
			Resources:      []controlv1alpha1.ResourceRule{{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}},
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Mutations: []admissionregistrationv1.Mutation{
				{PatchType: admissionregistrationv1.PatchTypeJSONPatch, JSONPatch: &admissionregistrationv1.JSONPatch{
					Expression: `[JSONPatch{op: "add", path: "/metadata/annotations/region", value: location.metadata.labels["region"]}]`}},
				{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration, ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
					Expression: `Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{
					  containers: [Object.spec.template.spec.containers{name: "app",
					    env: [Object.spec.template.spec.containers.env{name: "REGION", value: location.metadata.labels["region"]}]}]}}}}`}},
			},
		},
	}
}

// webDeployment is a Deployment the region Customization selects (it need not exist in the source).
func webDeployment() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]interface{}{"name": "web", "namespace": "apps", "labels": map[string]interface{}{"app": "web"},
			"annotations": map[string]interface{}{"example.com/kept": "yes"}},
		"spec": map[string]interface{}{
			"selector": map[string]interface{}{"matchLabels": map[string]interface{}{"app": "web"}},
			"template": map[string]interface{}{
				"metadata": map[string]interface{}{"labels": map[string]interface{}{"app": "web"}},
				"spec":     map[string]interface{}{"containers": []interface{}{map[string]interface{}{"name": "app", "image": "web:1"}}},
			},
		},
	}}
}

// createCustomization creates c in the source and returns the stored object.
func createCustomization(t *testing.T, ctx context.Context, ri dynamic.ResourceInterface, c *controlv1alpha1.Customization) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ri.Create(ctx, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Customization %s: %v", c.Name, err)
	}
	return out
}

// parseResourceVersion returns u's resourceVersion as a number.
func parseResourceVersion(t *testing.T, u *unstructured.Unstructured) uint64 {
	t.Helper()
	var v uint64
	if _, err := fmt.Sscan(u.GetResourceVersion(), &v); err != nil {
		t.Fatalf("resourceVersion %q: %v", u.GetResourceVersion(), err)
	}
	return v
}
