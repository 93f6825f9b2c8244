package cache

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

func testObject() *Object {
	u := cm("ns", "a", 7, locs("east"), "l:app=x", "d:k=v")
	return newObject(contract.NewKey("root", "ns", "a"), "root", "ns", "a", []string{"east"}, 7, u)
}

func TestObjectCacheEncodeOncePerIdentifier(t *testing.T) {
	o := testObject()
	var calls atomic.Int32
	encode := func(obj runtime.Object, w io.Writer) error {
		calls.Add(1)
		if obj != o.Unstructured() {
			t.Errorf("encoder got %T, want the wrapped unstructured", obj)
		}
		return unstructured.UnstructuredJSONScheme.Encode(obj, w)
	}
	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, 50)
	for i := range outs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			id := runtime.Identifier("json")
			if i%2 == 1 {
				id = "yaml"
			}
			if err := o.CacheEncode(id, encode, &outs[i]); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	if n := calls.Load(); n != 2 {
		t.Fatalf("encoder ran %d times, want once per identifier (2)", n)
	}
	for i := range outs {
		if !bytes.Equal(outs[i].Bytes(), outs[i%2].Bytes()) || outs[i].Len() == 0 {
			t.Fatalf("output %d differs", i)
		}
	}
	// Errors are cached too.
	fails := 0
	bad := func(runtime.Object, io.Writer) error { fails++; return io.ErrUnexpectedEOF }
	for i := 0; i < 3; i++ {
		if err := o.CacheEncode("bad", bad, io.Discard); err != io.ErrUnexpectedEOF {
			t.Fatalf("got %v", err)
		}
	}
	if fails != 1 {
		t.Fatalf("failing encoder ran %d times", fails)
	}
}

func TestObjectInterfaces(t *testing.T) {
	o := testObject()
	b1, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := o.Unstructured().MarshalJSON()
	var a, b map[string]interface{}
	_ = json.Unmarshal(b1, &a)
	_ = json.Unmarshal(want, &b)
	if a["metadata"].(map[string]interface{})["name"] != "a" || len(a) != len(b) {
		t.Fatalf("MarshalJSON = %s", b1)
	}
	j1, _ := o.MarshalJSON()
	j2, _ := o.MarshalJSON()
	if &j1[0] != &j2[0] {
		t.Fatalf("MarshalJSON not cached")
	}
	acc, err := meta.Accessor(o)
	if err != nil || acc.GetName() != "a" || acc.GetResourceVersion() != "7" {
		t.Fatalf("meta.Accessor: %v %v", acc, err)
	}
	if gvk := o.GetObjectKind().GroupVersionKind(); gvk != testGVK {
		t.Fatalf("GVK %v", gvk)
	}
	cp := o.DeepCopyObject().(*unstructured.Unstructured)
	cp.SetName("changed")
	if o.Name() != "a" || o.Unstructured().GetName() != "a" {
		t.Fatalf("DeepCopyObject shares state")
	}
	if o.Labels()["app"] != "x" || o.Fields()["metadata.namespace"] != "ns" || o.Fields()["metadata.name"] != "a" {
		t.Fatalf("labels/fields %v %v", o.Labels(), o.Fields())
	}
	d := o.withResourceVersion(9)
	if d.ResourceVersion() != 9 || d.Unstructured().GetResourceVersion() != "9" || o.Unstructured().GetResourceVersion() != "7" {
		t.Fatalf("withResourceVersion")
	}
}
