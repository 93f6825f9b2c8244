package view

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestUnwrapKeepsLists: unwrap gives the CRD table convertor an unstructured object for a
// single object given as runtime.Unstructured (a cache.Object as its encoders see it), and
// leaves an unstructured list whole.
func TestUnwrapKeepsLists(t *testing.T) {
	list := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMapList"}}
	list.Items = []unstructured.Unstructured{{Object: map[string]interface{}{"kind": "ConfigMap"}}}
	if got := unwrap(list); got != list {
		t.Fatalf("unwrap turned a list into %T", got)
	}
	u := &unstructured.Unstructured{Object: map[string]interface{}{"kind": "ConfigMap", "metadata": map[string]interface{}{"name": "a"}}}
	got, ok := unwrap(u).(*unstructured.Unstructured)
	if !ok || got.GetName() != "a" {
		t.Fatalf("unwrap(%v) = %v", u, got)
	}
}
