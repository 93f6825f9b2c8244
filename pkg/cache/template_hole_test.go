package cache

import (
	"reflect"
	"testing"

	kjson "sigs.k8s.io/json"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// holeCases are objects as the source's bytes whose real assignment annotation (and
// resourceVersion) is written in a way a byte search for `"key":"value"` does not find, while a
// nested field holds the same key and value written the usual way. Each location's view must
// still show only its own location in metadata.annotations and leave the nested field as it is.
var holeCases = map[string]string{
	"escaped slash in the key": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"o","namespace":"ns","uid":"u1","resourceVersion":"10",` +
		`"annotations":{"kcp.io\/assigned-locations":"[\"east\",\"west\"]"}},` +
		`"data":{"x":"y"},"spec":{"kcp.io/assigned-locations":"[\"east\",\"west\"]"}}`,
	"space after the colon": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"o","namespace":"ns","uid":"u1","resourceVersion":"10",` +
		`"annotations":{"kcp.io/assigned-locations": "[\"east\",\"west\"]"}},` +
		`"spec":{"kcp.io/assigned-locations":"[\"east\",\"west\"]"}}`,
	"escaped value": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"o","namespace":"ns","uid":"u1","resourceVersion":"10",` +
		`"annotations":{"kcp.io/assigned-locations":"[\u0022east\",\"west\"]"}},` +
		`"spec":{"kcp.io/assigned-locations":"[\"east\",\"west\"]"}}`,
	"resourceVersion nested too": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"o","namespace":"ns","uid":"u1","resourceVersion" : "10",` +
		`"finalizers":["` + contract.LocationFinalizer("east") + `"],"annotations":{"kcp.io/assigned-locations" :"[\"east\",\"west\"]"}},` +
		`"spec":{"resourceVersion":"10","finalizers":["x"],"kcp.io/assigned-locations":"[\"east\",\"west\"]"}}`,
}

// TestTemplateHoleIsTheAnnotation: the hole of a template view is the value of
// metadata.annotations[kcp.io/assigned-locations] found structurally, not the first place the
// key and value occur as bytes; a view never shows another location's name.
func TestTemplateHoleIsTheAnnotation(t *testing.T) {
	for name, raw := range holeCases {
		t.Run(name, func(t *testing.T) {
			s := newTestStore(t, StoreOptions{})
			obj, err := source.DecodeObject([]byte(raw), source.Annotation{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Replace([]interface{}{obj}, "10"); err != nil {
				t.Fatal(err)
			}
			for _, loc := range []string{"east", "west"} {
				v, _, ok := s.Get(loc, "ns", "o")
				if !ok {
					t.Fatalf("%s: the object is not in the view", loc)
				}
				got := decoded(t, v)
				ann, _ := got["metadata"].(map[string]interface{})["annotations"].(map[string]interface{})
				if want := assignedToOnly(loc); ann[contract.AssignedLocationsAnnotation] != want {
					t.Errorf("%s: the view's annotation is %v, want %s", loc, ann[contract.AssignedLocationsAnnotation], want)
				}
				spec, _ := got["spec"].(map[string]interface{})
				if spec[contract.AssignedLocationsAnnotation] != `["east","west"]` {
					t.Errorf("%s: the nested field became %v", loc, spec[contract.AssignedLocationsAnnotation])
				}
				if rv, _ := spec["resourceVersion"]; rv != nil && rv != "10" {
					t.Errorf("%s: the nested resourceVersion became %v", loc, rv)
				}
				if f, _ := spec["finalizers"].([]interface{}); spec["finalizers"] != nil && (len(f) != 1 || f[0] != "x") {
					t.Errorf("%s: the nested finalizers became %v", loc, spec["finalizers"])
				}
			}
		})
	}
}

// FuzzTemplateHole holds findAssignmentHole to sigs.k8s.io/json: in any object the source's
// object client accepts, the hole is the value of metadata.annotations[kcp.io/assigned-locations]
// as the decoder reads it: writing another value there changes that annotation, and nothing
// else the decoder reads. `go test` runs it on its seeds (holeCases and the template test's
// shapes).
func FuzzTemplateHole(f *testing.F) {
	for _, raw := range holeCases {
		f.Add([]byte(raw))
	}
	f.Add([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"annotations":{"a":"b","kcp.io/assigned-locations":"[\"east\"]"}},"data":{"kcp.io/assigned-locations":"[\"east\"]"}}`))
	f.Add([]byte(`{"metadata":{"annotations":{"kcp.io/assigned-locations":"x","kcp.io/assigned-locations":"[\"a\",\"b\"]"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, err := source.DecodeObject(data, source.Annotation{})
		if err != nil {
			return
		}
		raw := obj.JSON().Bytes()
		value, has := obj.Annotations[contract.AssignedLocationsAnnotation]
		h, ok := findAssignmentHole(raw)
		if ok != has {
			t.Fatalf("findAssignmentHole(%q): %v, the decoder reads the annotation: %v", raw, ok, has)
		}
		if !ok {
			return
		}
		var got string
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw[h.start:h.end], &got); err != nil || got != value {
			t.Fatalf("the hole of %q is %q, the annotation %q", raw, raw[h.start:h.end], value)
		}
		filled := append(append(append([]byte(nil), raw[:h.start]...), `"[\"filled\"]"`...), raw[h.end:]...)
		var before, after map[string]interface{}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &before); err != nil {
			t.Fatal(err)
		}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(filled, &after); err != nil {
			t.Fatalf("filling the hole of %q gives %q: %v", raw, filled, err)
		}
		before["metadata"].(map[string]interface{})["annotations"].(map[string]interface{})[contract.AssignedLocationsAnnotation] = `["filled"]`
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("filling the hole of %q gives %q", raw, filled)
		}
	})
}
