package dependencies

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func obj(kind, name string, spec map[string]interface{}) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{"kind": kind, "metadata": map[string]interface{}{"name": name}, "spec": spec}}
}

// TestSelectors: Services and PodDisruptionBudgets select by the template's labels, HPAs
// target the workload by kind and name.
func TestSelectors(t *testing.T) {
	s := NewSelectors(
		[]*unstructured.Unstructured{
			obj("Service", "web", map[string]interface{}{"selector": map[string]interface{}{"app": "web"}}),
			obj("Service", "web-canary", map[string]interface{}{"selector": map[string]interface{}{"app": "web", "track": "canary"}}),
			obj("Service", "external", map[string]interface{}{"type": "ExternalName", "externalName": "example.invalid"}),
		},
		[]*unstructured.Unstructured{
			obj("HorizontalPodAutoscaler", "web", map[string]interface{}{"scaleTargetRef": map[string]interface{}{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": int64(3)}),
			obj("HorizontalPodAutoscaler", "web-sts", map[string]interface{}{"scaleTargetRef": map[string]interface{}{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web"}, "maxReplicas": int64(3)}),
		},
		[]*unstructured.Unstructured{
			obj("PodDisruptionBudget", "web", map[string]interface{}{"selector": map[string]interface{}{"matchExpressions": []interface{}{map[string]interface{}{"key": "app", "operator": "In", "values": []interface{}{"web", "api"}}}}}),
			obj("PodDisruptionBudget", "all", map[string]interface{}{"selector": map[string]interface{}{}}),
			obj("PodDisruptionBudget", "none", map[string]interface{}{}),
		},
	)
	deployment := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	if got := refs(s.References(deployment, "web", map[string]string{"app": "web", "tier": "front"})); got != "horizontalpodautoscalers.autoscaling/web poddisruptionbudgets.policy/all poddisruptionbudgets.policy/web services/web" {
		t.Errorf("web: %s", got)
	}
	if got := refs(s.References(deployment, "api", map[string]string{"app": "api"})); got != "poddisruptionbudgets.policy/all poddisruptionbudgets.policy/web" {
		t.Errorf("api: %s", got)
	}
	if got := refs(s.References(deployment, "bare", nil)); got != "" {
		t.Errorf("a template without labels: %s", got)
	}
}

// TestSelectorCache: a SelectorCache parses an object once per resourceVersion (a change
// without a new resourceVersion, which kube-apiserver never makes, is not seen), parses it
// again at a new one, and forgets a deleted one.
func TestSelectorCache(t *testing.T) {
	svc := obj("Service", "web", map[string]interface{}{"selector": map[string]interface{}{"app": "web"}})
	svc.SetUID("u1")
	svc.SetResourceVersion("1")
	c := NewSelectorCache()
	deployment := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	references := func() string {
		return refs(c.Selectors([]*unstructured.Unstructured{svc}, nil, nil).References(deployment, "web", map[string]string{"app": "web"}))
	}
	if got := references(); got != "services/web" {
		t.Fatalf("first parse: %q", got)
	}
	_ = unstructured.SetNestedStringMap(svc.Object, map[string]string{"app": "api"}, "spec", "selector")
	if got := references(); got != "services/web" {
		t.Errorf("same resourceVersion: parsed again (%q), the cache keeps nothing", got)
	}
	svc.SetResourceVersion("2")
	if got := references(); got != "" {
		t.Errorf("new resourceVersion: still %q, the cache kept an old version", got)
	}
	c.Forget("u1")
	if len(c.parsed) != 0 {
		t.Errorf("Forget kept %d entries", len(c.parsed))
	}
}
