package customization

import (
	"context"
	"errors"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/client-go/openapi/openapitest"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

var deploymentsGVR = appsV1.WithResource("deployments")

var appsV1 = schema.GroupVersion{Group: "apps", Version: "v1"}

// deployment returns a Deployment apps/web with two containers pulling from registry.example.
func deployment() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]interface{}{
			"name": "web", "namespace": "apps", "uid": "u-1", "resourceVersion": "42",
			"labels":      map[string]interface{}{"app": "web"},
			"annotations": map[string]interface{}{"kcp.io/cluster": "default"},
		},
		"spec": map[string]interface{}{
			"replicas": int64(2),
			"selector": map[string]interface{}{"matchLabels": map[string]interface{}{"app": "web"}},
			"template": map[string]interface{}{
				"metadata": map[string]interface{}{"labels": map[string]interface{}{"app": "web"}},
				"spec": map[string]interface{}{"containers": []interface{}{
					map[string]interface{}{"name": "app", "image": "registry.example/web:1.0",
						"env": []interface{}{map[string]interface{}{"name": "MODE", "value": "prod"}}},
					map[string]interface{}{"name": "sidecar", "image": "registry.example/proxy:2.1"},
				}},
			},
		},
	}}
}

// customization returns a Customization namespace/name selecting deployments.apps with mutations.
func customization(name string, mutations ...admissionregistrationv1.Mutation) *controlv1alpha1.Customization {
	return &controlv1alpha1.Customization{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps", Generation: 1},
		Spec: controlv1alpha1.CustomizationSpec{
			Resources: []controlv1alpha1.ResourceRule{{APIGroups: []string{"apps"}, APIVersions: []string{"*"}, Resources: []string{"deployments"}}},
			Mutations: mutations,
		},
	}
}

// jsonPatch is a JSONPatch mutation with expression.
func jsonPatch(expression string) admissionregistrationv1.Mutation {
	return admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
		JSONPatch: &admissionregistrationv1.JSONPatch{Expression: expression}}
}

// applyConfiguration is an ApplyConfiguration mutation with expression.
func applyConfiguration(expression string) admissionregistrationv1.Mutation {
	return admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
		ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: expression}}
}

// locations are three SyncTargets: east and north in region eu, west in region us.
var locations = []Location{
	{Name: "east", Labels: map[string]string{"region": "eu"}},
	{Name: "north", Labels: map[string]string{"region": "eu", "tier": "edge"}},
	{Name: "west", Labels: map[string]string{"region": "us"}},
}

// snapshot compiles cs for a plain source whose cluster is "default" and fails the test on a
// compile error.
func snapshot(t testing.TB, cs ...*controlv1alpha1.Customization) *Snapshot {
	t.Helper()
	s, errs := NewCompiler(Options{PlainCluster: "default", TypeConverters: typeConverters(t)}).Snapshot(7, cs, locations)
	if len(errs) > 0 {
		t.Fatalf("compile errors: %v", errs)
	}
	return s
}

// typeConverters returns k8s.io/apiserver's TypeConverterManager over the OpenAPI v3 documents
// client-go embeds for tests (core, apps, batch ... of a real kube-apiserver), running until the
// test ends, once it knows apps/v1.
func typeConverters(t testing.TB) patch.TypeConverterManager {
	t.Helper()
	m := patch.NewTypeConverterManager(nil, openapitest.NewEmbeddedFileClient())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go m.Run(ctx)
	gvk := appsV1.WithKind("Deployment")
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return m.GetTypeConverter(gvk) != nil, nil
	}); err != nil {
		t.Fatalf("the type converter manager never learnt %s: %v", gvk, err)
	}
	return m
}

// render renders deployment() for location and fails the test on an error.
func render(t *testing.T, s *Snapshot, obj *unstructured.Unstructured, location string) *unstructured.Unstructured {
	t.Helper()
	out, err := s.Render(context.Background(), deploymentsGVR, "default", obj, location)
	if err != nil {
		t.Fatalf("render for %s: %v", location, err)
	}
	return out
}

// renderError renders obj for location and returns the *RenderError, failing the test on success.
func renderError(t *testing.T, s *Snapshot, obj *unstructured.Unstructured, location string) *RenderError {
	t.Helper()
	out, err := s.Render(context.Background(), deploymentsGVR, "default", obj, location)
	if err == nil {
		t.Fatalf("render for %s succeeded, want an error: %v", location, out.Object)
	}
	var re *RenderError
	if !errors.As(err, &re) {
		t.Fatalf("error %T is not a *RenderError: %v", err, err)
	}
	if out != nil {
		t.Errorf("a failed render returned an object")
	}
	return re
}

// container returns the container named name of a rendered Deployment.
func container(t *testing.T, u *unstructured.Unstructured, name string) map[string]interface{} {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		if m := c.(map[string]interface{}); m["name"] == name {
			return m
		}
	}
	t.Fatalf("no container %q in %v", name, cs)
	return nil
}

// env returns the value of the environment variable name of container c ("" and false if none).
func env(c map[string]interface{}, name string) (string, bool) {
	es, _ := c["env"].([]interface{})
	for _, e := range es {
		if m := e.(map[string]interface{}); m["name"] == name {
			v, _ := m["value"].(string)
			return v, true
		}
	}
	return "", false
}
