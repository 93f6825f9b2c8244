package source

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// objectDocs are source objects as API servers write them and as they could be written: the
// managedFields member first, in the middle, last and alone; no annotations, empty
// annotations; escapes in keys and values; whitespace; look-alike keys nested in the spec.
var objectDocs = map[string]string{
	"configmap":            `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","uid":"u-1","resourceVersion":"12","creationTimestamp":"2026-11-25T10:00:00Z","labels":{"app":"web"},"annotations":{"kcp.io/assigned-locations":"[\"east\",\"west\"]"},"managedFields":[{"manager":"kubectl","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:k":{}}}}]},"data":{"k":"v"}}`,
	"managed first":        `{"metadata":{"managedFields":[{"manager":"m"}],"name":"b","resourceVersion":"3"},"kind":"Widget","apiVersion":"example.com/v1","spec":{"metadata":{"name":"not-me"}}}`,
	"managed alone":        `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"managedFields":[]}}`,
	"no annotations":       `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"ns","generation":4,"labels":{}},"spec":{"replicas":3,"template":{"metadata":{"annotations":{"x":"y"}}}}}`,
	"empty annotations":    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"e","annotations":{}}}`,
	"escapes":              `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"f","labels":{"a\u002fb":"c\"d"},"annotations":{"note":"\u003cb\u003e \\ \n","na\u006de":"x"}},"data":{"q":"}{][\"\\"}}`,
	"spaces":               " {\n  \"apiVersion\" : \"v1\" ,\n  \"kind\":\"ConfigMap\",\n  \"metadata\" : { \"name\" : \"g\" , \"managedFields\" : [ ] , \"uid\" : \"u\" }\n}\n",
	"null metadata fields": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"h","labels":null,"annotations":null,"generation":null}}`,
}

// decodeTree is what client-go's dynamic client makes of data, with managedFields dropped.
func decodeTree(t *testing.T, data []byte) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
	if meta, ok := u.Object["metadata"].(map[string]interface{}); ok {
		delete(meta, "managedFields")
	}
	return u
}

// TestDecodeObjectMatchesTheTree checks DecodeObject against a full decoding: the metadata it
// reads equals the tree's, and its bytes decode to the tree without managedFields.
func TestDecodeObjectMatchesTheTree(t *testing.T) {
	for name, doc := range objectDocs {
		t.Run(name, func(t *testing.T) {
			o, err := DecodeObject([]byte(doc), Annotation{})
			if err != nil {
				t.Fatal(err)
			}
			want := decodeTree(t, []byte(doc))
			got := decodeTree(t, o.JSON().Bytes())
			if !reflect.DeepEqual(got.Object, want.Object) {
				t.Fatalf("the kept bytes decode to\n%v\nwant\n%v", got.Object, want.Object)
			}
			if strings.Contains(string(o.JSON().Bytes()), "managedFields") {
				t.Errorf("managedFields kept: %s", o.JSON().Bytes())
			}
			if !json.Valid(o.JSON().Bytes()) {
				t.Errorf("invalid JSON kept: %s", o.JSON().Bytes())
			}
			if o.APIVersion != want.GetAPIVersion() || o.Kind != want.GetKind() || o.Name != want.GetName() || o.Namespace != want.GetNamespace() ||
				o.UID != want.GetUID() || o.ResourceVersion != want.GetResourceVersion() || o.Generation != want.GetGeneration() {
				t.Errorf("metadata %+v %+v, want the tree's %s %s %s/%s uid %s rv %s gen %d", o.TypeMeta, o.ObjectMeta,
					want.GetAPIVersion(), want.GetKind(), want.GetNamespace(), want.GetName(), want.GetUID(), want.GetResourceVersion(), want.GetGeneration())
			}
			if len(o.Labels)+len(want.GetLabels()) > 0 && !reflect.DeepEqual(o.Labels, want.GetLabels()) {
				t.Errorf("labels %v, want %v", o.Labels, want.GetLabels())
			}
			if len(o.Annotations)+len(want.GetAnnotations()) > 0 && !reflect.DeepEqual(o.Annotations, want.GetAnnotations()) {
				t.Errorf("annotations %v, want %v", o.Annotations, want.GetAnnotations())
			}

			// WithAnnotation is SetAnnotations on the tree.
			edited, err := o.WithAnnotation("kcp.io/cluster", `ro"ot`)
			if err != nil {
				t.Fatal(err)
			}
			ann := want.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			ann["kcp.io/cluster"] = `ro"ot`
			want.SetAnnotations(ann)
			if got := decodeTree(t, edited.Bytes()); !reflect.DeepEqual(got.Object, want.Object) {
				t.Fatalf("WithAnnotation gives\n%s\nwant\n%v", edited, want.Object)
			}

			// The object client adds it while decoding, in the same bytes.
			added, err := DecodeObject([]byte(doc), Annotation{Key: "kcp.io/cluster", Value: `ro"ot`})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(added.JSON().Bytes(), edited.Bytes()) {
				t.Errorf("decoding with the annotation added gives\n%s\nwant\n%s", added.JSON(), edited.Bytes())
			}
			key, had, ok := added.Added()
			if !ok || key != "kcp.io/cluster" || had != (o.Annotations != nil) || added.Annotations["kcp.io/cluster"] != `ro"ot` {
				t.Errorf("Added() = %q, %v, %v with annotations %v; the object had annotations: %v", key, had, ok, added.Annotations, o.Annotations != nil)
			}
			if again, _ := DecodeObject(added.JSON().Bytes(), Annotation{Key: "kcp.io/cluster", Value: "other"}); again == nil || !bytes.Equal(again.JSON().Bytes(), added.JSON().Bytes()) {
				t.Error("an annotation the object has was added again")
			} else if _, _, ok := again.Added(); ok {
				t.Error("Added() reports an annotation the object had")
			}
		})
	}
}

// TestDecodeObjectRefusesMalformedText checks that text that is not one JSON object, or whose
// metadata has the wrong types, is an error and never a panic.
func TestDecodeObjectRefusesMalformedText(t *testing.T) {
	for _, doc := range []string{
		``, `[]`, `"x"`, `{`, `{"metadata":{"name":"a"}`, `{"metadata":{"name":5}}`, `{"metadata":{"labels":{"a":1}}}`,
		`{"metadata":{"annotations":[]}}`, `{"metadata":{"generation":"x"}}`, `{"kind":"A"} {}`, `{"a" 1}`, `{"a":1,}`,
		`{"metadata":{"name":"a\`,
	} {
		if _, err := DecodeObject([]byte(doc), Annotation{}); err == nil {
			t.Errorf("DecodeObject(%q) succeeded", doc)
		}
	}
	o, _ := DecodeObject([]byte(objectDocs["configmap"]), Annotation{})
	if _, err := o.WithAnnotation("kcp.io/assigned-locations", "x"); err == nil {
		t.Error("WithAnnotation replaced an existing annotation")
	}
}

// TestDecodeListRefusesMalformedText checks that a list body that is not a list of objects is
// an error, never a panic, and that an empty or null items list is an empty list. (An item
// that does not decode is skipped alone: TestDecodeListSkipsItemsThatDoNotDecode.)
func TestDecodeListRefusesMalformedText(t *testing.T) {
	for _, doc := range []string{
		``, `[]`, `{"items":{}}`, `{"metadata":[]}`, `{"items":[]} x`, `{"items":[{}`,
	} {
		var l List
		if err := decodeList([]byte(doc), &l, Annotation{}); err == nil {
			t.Errorf("decodeList(%q) succeeded", doc)
		}
	}
	for _, doc := range []string{`{"items":[]}`, `{"items":null,"metadata":{"resourceVersion":"5"}}`, `{"kind":"ConfigMapList"}`} {
		var l List
		if err := decodeList([]byte(doc), &l, Annotation{}); err != nil || len(l.Items) != 0 {
			t.Errorf("decodeList(%q): %v, %d items", doc, err, len(l.Items))
		}
	}
}

// TestDecodeListGivesItemsTheirKind checks that the items of a list of a built-in resource,
// which kube-apiserver writes without apiVersion and kind, get the list's (kind without "List")
// in their fields and in their JSON, which then decodes as an unstructured object; items that
// have them, and lists without a kind, are left as they are. An item written with whitespace
// (`{ }`) is kept compact (rawjson.Compact).
func TestDecodeListGivesItemsTheirKind(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want []string // each item's JSON
	}{
		{`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[` +
			`{"metadata":{"name":"a","managedFields":[{}]},"data":{"k":"v"}}, { } ,{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}}]}`,
			[]string{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`, `{"apiVersion":"v1","kind":"ConfigMap"}`,
				`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}}`}},
		{`{"items":[{"metadata":{"name":"a"}}]}`, []string{`{"metadata":{"name":"a"}}`}},
	} {
		var l List
		if err := decodeList([]byte(tc.doc), &l, Annotation{}); err != nil {
			t.Fatalf("decodeList(%s): %v", tc.doc, err)
		}
		if len(l.Items) != len(tc.want) {
			t.Fatalf("decodeList(%s): %d items", tc.doc, len(l.Items))
		}
		for i, o := range l.Items {
			if got := string(o.JSON().Bytes()); got != tc.want[i] {
				t.Errorf("item %d of %s: %s, want %s", i, tc.doc, got, tc.want[i])
			}
			var u unstructured.Unstructured
			if err := u.UnmarshalJSON(o.JSON().Bytes()); (err == nil) != (o.Kind != "") || u.GetKind() != o.Kind || u.GetAPIVersion() != o.APIVersion {
				t.Errorf("item %d of %s: fields %s %s, decodes as %s %s (%v)", i, tc.doc, o.APIVersion, o.Kind, u.GetAPIVersion(), u.GetKind(), err)
			}
		}
	}
}

// TestDecodeObjectAllocationsDoNotGrowWithMembers checks that reading member names allocates
// nothing (MemberName): decoding an object with 40 more top-level members, none of which it
// keeps, costs no more allocations than one without them.
func TestDecodeObjectAllocationsDoNotGrowWithMembers(t *testing.T) {
	object := func(extra int) []byte {
		var b strings.Builder
		b.WriteString(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","resourceVersion":"5"}`)
		for i := 0; i < extra; i++ {
			fmt.Fprintf(&b, `,"member%02d":%d`, i, i)
		}
		b.WriteString(`}`)
		return []byte(b.String())
	}
	allocs := func(raw []byte) float64 {
		return testing.AllocsPerRun(100, func() {
			if _, err := DecodeObject(raw, Annotation{}); err != nil {
				t.Fatal(err)
			}
		})
	}
	if few, many := allocs(object(0)), allocs(object(40)); many > few {
		t.Errorf("%v allocations with 40 more members, %v without", many, few)
	}
}
