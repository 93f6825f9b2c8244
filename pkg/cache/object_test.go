package cache

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/component-base/metrics/testutil"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
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
		if _, ok := obj.(*jsonObject); !ok {
			t.Errorf("encoder got %T, want the object's JSON (*jsonObject)", obj)
		}
		return json.NewEncoder(w).Encode(obj)
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
	if o.Labels().Get("app") != "x" || o.Fields().Get("metadata.namespace") != "ns" || o.Fields().Get("metadata.name") != "a" {
		t.Fatalf("labels/fields %v %v", o.Labels(), o.Fields())
	}
	d := o.withResourceVersion(9)
	if d.ResourceVersion() != 9 || d.Unstructured().GetResourceVersion() != "9" || o.Unstructured().GetResourceVersion() != "7" {
		t.Fatalf("withResourceVersion")
	}
}

// TestObjectEncodesFromBytes: an Object kept as bytes (compact dropped its tree) is written by
// the view's real encoders (k8s.io/apimachinery's JSON, pretty JSON and YAML serializers, and
// the apiserver's watch frame around the JSON one) exactly as its decoded tree would be, and
// encoding never decodes it.
func TestObjectEncodesFromBytes(t *testing.T) {
	u := cm("ns", "a", 7, locs("east"), "l:app=x", "d:k=<v & w>", "a:note=ünïcode")
	o := newObject(contract.NewKey("root", "ns", "a"), "root", "ns", "a", []string{"east"}, 7, u.DeepCopy())
	o.compact(nil)
	if o.u != nil {
		t.Fatalf("compact kept the decoded tree of an object shown as it is")
	}
	for _, opts := range []kjson.SerializerOptions{{}, {Pretty: true}, {Yaml: true}} {
		s := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, nil, nil, opts)
		var got, want bytes.Buffer
		if err := s.Encode(o, &got); err != nil {
			t.Fatal(err)
		}
		if err := s.Encode(u, &want); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("%+v: encoded from bytes\n%s\nfrom the tree\n%s", opts, got.String(), want.String())
		}
	}
	if o.u != nil {
		t.Fatalf("encoding decoded the object")
	}
	// Content asked for through the encoder's view decodes a copy, which is then encoded.
	j := o.encodable().(*jsonObject)
	j.UnstructuredContent()["metadata"].(map[string]interface{})["name"] = "b"
	b, _ := j.MarshalJSON()
	if !strings.Contains(string(b), `"name":"b"`) || o.Unstructured().GetName() != "a" {
		t.Fatalf("jsonObject content: %s, object name %q", b, o.Unstructured().GetName())
	}
	if acc, err := meta.Accessor(o.encodable()); err != nil || acc.GetName() != "a" {
		t.Fatalf("meta.Accessor of the encodable: %v %v", acc, err)
	}
}

// TestObjectSourceObjectAfterCompact: on a plain source, SourceObject of an object kept as
// bytes undoes the kcp.io/cluster annotation the cache added, or restores the user's value.
func TestObjectSourceObjectAfterCompact(t *testing.T) {
	s := newTestStore(t, StoreOptions{DefaultCluster: "root"})
	for _, c := range []struct {
		name  string
		extra []string
	}{
		{"noAnnotations", nil},
		{"otherAnnotation", []string{"a:keep=1"}},
		{"userValue", []string{"a:" + contract.ClusterAnnotation + "=other"}},
	} {
		src := cm("ns", c.name, 5, nil, c.extra...)
		mustUpdate(t, s, src.DeepCopy())
		s.mu.RLock()
		o := s.objects[contract.NewKey("root", "ns", c.name)]
		s.mu.RUnlock()
		if o == nil || o.u != nil {
			t.Fatalf("%s: not stored as bytes: %v", c.name, o)
		}
		if got := o.Unstructured().GetAnnotations()[contract.ClusterAnnotation]; got != "root" {
			t.Fatalf("%s: shown kcp.io/cluster %q", c.name, got)
		}
		if got := sourceObject(t, o); !equality.Semantic.DeepEqual(got.Object, src.Object) {
			t.Fatalf("%s: SourceObject\n%v\nwant\n%v", c.name, got.Object, src.Object)
		}
	}
}

// TestEncodeOncePerEvent: 100 watches of one location receive the same event, and each writes
// it as the apiserver's watch encoder of its own connection does (CacheEncode with the watch
// frame identifier of its event type); the event's object is encoded once
// (mapper_apiserver_object_encodings_total), for an object shown as it is, one assigned to
// several locations (a view made from its JSON) and one with status records (a rendered view).
func TestEncodeOncePerEvent(t *testing.T) {
	registerMetrics()
	for _, c := range []struct {
		name  string
		extra []string
		locs  []string
	}{
		{"asItIs", nil, locs("east")},
		{"severalLocations", nil, locs("east", "west")},
		{"statusRecords", []string{"a:" + contract.StatusRecordAnnotation("east") + `={"p":1}`}, locs("east", "west")},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newTestStore(t, StoreOptions{})
			mustReplace(t, s, 10)
			var watches []watch.Interface
			for i := 0; i < 100; i++ {
				watches = append(watches, mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10}))
			}
			before, err := testutil.GetCounterMetricValue(objectEncodings)
			if err != nil {
				t.Fatal(err)
			}
			mustAdd(t, s, cm("ns", "a", 11, c.locs, c.extra...))
			var frames []string
			for _, w := range watches {
				e := next(t, w)
				obj, ok := e.Object.(runtime.CacheableObject)
				if !ok {
					t.Fatalf("event object %T is not cacheable", e.Object)
				}
				var out bytes.Buffer
				if err := obj.CacheEncode(runtime.Identifier(`{"name":"watch","eventType":"`+string(e.Type)+`"}`), watchFrameEncoder(e.Type), &out); err != nil {
					t.Fatal(err)
				}
				frames = append(frames, out.String())
			}
			after, err := testutil.GetCounterMetricValue(objectEncodings)
			if err != nil {
				t.Fatal(err)
			}
			if after-before != 1 {
				t.Fatalf("%v encodings for one event delivered to 100 watchers, want 1", after-before)
			}
			for _, f := range frames {
				if f != frames[0] || !strings.Contains(f, `"type":"ADDED"`) {
					t.Fatalf("frames differ or are wrong: %s vs %s", f, frames[0])
				}
			}
		})
	}
}
