package view

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// benchList builds a view List of n ConfigMaps of about 1.5 KiB each, served from a real store.
func benchList(b *testing.B, n int) *List {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	s := cache.NewResourceStore(gvr, gvr.GroupVersion().WithKind("ConfigMap"), true, cache.StoreOptions{DefaultCluster: "c"})
	var objs []interface{}
	for i := 0; i < n; i++ {
		objs = append(objs, &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]interface{}{
				"name": fmt.Sprintf("cm-%04d", i), "namespace": "ns", "resourceVersion": fmt.Sprint(i + 1),
				"annotations": map[string]interface{}{contract.AssignedLocationsAnnotation: `["east"]`},
			},
			"data": map[string]interface{}{"payload": strings.Repeat("x", 1400)},
		}})
	}
	if err := s.Replace(objs, fmt.Sprint(n)); err != nil {
		b.Fatal(err)
	}
	res, err := s.List("east", cache.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	l := &List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"}, ListMeta: metav1.ListMeta{ResourceVersion: fmt.Sprint(n)}}
	for _, o := range res.Items {
		l.Items = append(l.Items, o)
	}
	return l
}

// BenchmarkEncodeList measures writing one location's list of 100 ConfigMaps with the view's
// JSON encoder (what a LIST response costs the server besides the network): the items' JSON is
// encoded once, so after the first iteration only the list is assembled.
func BenchmarkEncodeList(b *testing.B) {
	l := benchList(b, 100)
	ser := newSerializer()
	enc := ser.EncoderForVersion(ser.SupportedMediaTypes()[0].Serializer, schema.GroupVersion{Version: "v1"})
	var _ runtime.Encoder = enc
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := enc.Encode(l, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWriteListMatchesEncodingJSON checks that writeList writes the same JSON document as
// apimachinery's own encoder does for the same list.
func TestWriteListMatchesEncodingJSON(t *testing.T) {
	l := benchList(&testing.B{}, 3)
	l.Continue = "token"
	var fast, slow strings.Builder
	if err := writeList(l, &fast); err != nil {
		t.Fatal(err)
	}
	ser := newSerializer()
	if err := ser.json.Encode(l, &slow); err != nil {
		t.Fatal(err)
	}
	var a, b interface{}
	if err := json.Unmarshal([]byte(fast.String()), &a); err != nil {
		t.Fatalf("writeList wrote invalid JSON: %v\n%s", err, fast.String())
	}
	if err := json.Unmarshal([]byte(slow.String()), &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("writeList wrote\n%s\nthe JSON serializer\n%s", fast.String(), slow.String())
	}
	empty := &List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NamespaceList"}}
	fast.Reset()
	if err := writeList(empty, &fast); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fast.String(), `"items":[]`) {
		t.Errorf("an empty list: %s", fast.String())
	}
}
