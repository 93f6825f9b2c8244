package view

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
)

// TestUnwrapKeepsLists: unwrap gives the CRD table convertor an unstructured object for a
// single object given as runtime.Unstructured (a cache.Object as its encoders see it), and
// leaves an unstructured list whole.
func TestUnwrapKeepsLists(t *testing.T) {
	list := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMapList"}}
	list.Items = []unstructured.Unstructured{{Object: map[string]interface{}{"kind": "ConfigMap"}}}
	if got, err := unwrap(list); got != list || err != nil {
		t.Fatalf("unwrap turned a list into %T", got)
	}
	u := &unstructured.Unstructured{Object: map[string]interface{}{"kind": "ConfigMap", "metadata": map[string]interface{}{"name": "a"}}}
	obj, err := unwrap(u)
	got, ok := obj.(*unstructured.Unstructured)
	if err != nil || !ok || got.GetName() != "a" {
		t.Fatalf("unwrap(%v) = %v", u, got)
	}
}

// undecodable is a view object whose content does not decode (cache.Object.Content's error).
type undecodable struct{ unstructured.Unstructured }

func (undecodable) Content() (*unstructured.Unstructured, error) {
	return nil, &cache.DecodeFailure{Key: "root|ns/a", ResourceVersion: "5", Err: errors.New("json: cannot unmarshal number 1e400")}
}

// TestTableOfAnObjectThatDoesNotDecode: the Table of an object whose content does not decode,
// alone, in a list, or as its GetObject hands it to a conversion, is an internal error (HTTP
// 500) that names the object version, never a row made of nothing.
func TestTableOfAnObjectThatDoesNotDecode(t *testing.T) {
	failure := &cache.DecodeFailure{Key: "root|ns/a", ResourceVersion: "5", Err: errors.New("json: cannot unmarshal number 1e400")}
	for name, obj := range map[string]runtime.Object{
		"object":         &undecodable{},
		"in a list":      &List{Items: []runtime.Object{&undecodable{}}},
		"from GetObject": failure,
	} {
		for kind, conv := range map[string]tableConvertor{
			"built-in":     newTableConvertor(nil, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ConfigMap"),
			"NAME and AGE": {},
		} {
			_, err := conv.ConvertToTable(context.Background(), obj, nil)
			if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "root|ns/a at resourceVersion 5 cannot be decoded") {
				t.Errorf("%s, %s: %v, want an internal error naming the object", name, kind, err)
			}
		}
	}
}
