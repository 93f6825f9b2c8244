package cache

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/component-base/metrics/testutil"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/rawjson"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// sourceItem is the object client's reading of one item of a list: DecodeItem.
func sourceItem(t *testing.T, name, rv, data string) *source.Object {
	t.Helper()
	return source.DecodeItem([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+name+`","namespace":"ns","uid":"uid-`+name+
		`","resourceVersion":"`+rv+`","annotations":{"kcp.io/assigned-locations":"[\"east\"]"}},"data":`+data+`}`), source.Annotation{})
}

// TestUndecodableVersionsAreSkipped: a version whose content does not decode (here a number
// outside the range of a float64) is skipped and counted once per object version, in a list
// and in a watch event; the rest of the list is served, and a stored object keeps its last
// version that decoded (it is neither replaced by a stub nor removed from the views).
func TestUndecodableVersionsAreSkipped(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	count := func() float64 {
		v, err := testutil.GetCounterMetricValue(undecodableObjects.WithLabelValues("configmaps"))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := count()
	good, bad := `{"k":"v"}`, `{"n":1e400}`
	if err := s.Replace([]interface{}{sourceItem(t, "a", "3", good), sourceItem(t, "b", "4", bad)}, "5"); err != nil {
		t.Fatalf("one item that does not decode failed the list: %v", err)
	}
	if _, _, ok := s.Get("east", "ns", "a"); !ok {
		t.Fatal("the item that decodes is not served")
	}
	if _, _, ok := s.Get("east", "ns", "b"); ok {
		t.Fatal("the item that does not decode is served")
	}
	if got := count() - before; got != 1 {
		t.Fatalf("counted %v object versions that do not decode, want 1", got)
	}

	// A new version of a that does not decode, twice (a relist): a keeps its version 3.
	for i := 0; i < 2; i++ {
		if err := s.Update(sourceItem(t, "a", "6", bad)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Replace([]interface{}{sourceItem(t, "a", "6", bad), sourceItem(t, "b", "7", good)}, "8"); err != nil {
		t.Fatal(err)
	}
	a, _, ok := s.Get("east", "ns", "a")
	if !ok || a.rvString != "3" {
		t.Fatalf("a is served: %v, at %v; want its last version that decodes, 3", ok, a)
	}
	if _, err := a.Content(); err != nil {
		t.Fatal(err)
	}
	if b, _, ok := s.Get("east", "ns", "b"); !ok || b.rvString != "7" {
		t.Fatal("b's version that decodes is not served")
	}
	if got := count() - before; got != 2 {
		t.Fatalf("counted %v object versions that do not decode, want 2 (b at 4, a at 6)", got)
	}
	// Its deletion, with a final state that does not decode, removes it.
	if err := s.Delete(sourceItem(t, "a", "9", bad)); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := s.Get("east", "ns", "a"); ok {
		t.Fatal("a deleted object is still served")
	}
}

// TestContentThatDoesNotDecodeIsAnError: an Object whose JSON does not decode gives readers the
// error (a *DecodeFailure naming the object version), never an object with the identity only.
func TestContentThatDoesNotDecodeIsAnError(t *testing.T) {
	o := &Object{key: "root|ns/a", namespace: "ns", name: "a", rvString: "5"}
	o.typeMeta.APIVersion, o.typeMeta.Kind = "v1", "ConfigMap"
	// Valid, compact JSON that the decoder refuses (a number out of the range of a float64):
	// ingest refuses it (rawjson.Normalize), so only a Compact written from raw text holds it.
	bad, err := rawjson.Marshal(json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"n":1e400}}`))
	if err != nil {
		t.Fatal(err)
	}
	o.jsonOnce.Do(func() { o.json = bad })
	_, err = o.Content()
	var failure *DecodeFailure
	if !errors.As(err, &failure) || !strings.Contains(err.Error(), "root|ns/a at resourceVersion 5 cannot be decoded") {
		t.Fatalf("Content: %v, want a DecodeFailure naming the object", err)
	}
	if u := o.Unstructured(); u != nil {
		t.Fatalf("Unstructured returned %v for content that does not decode", u.Object)
	}
	if _, ok := o.GetObject().(*DecodeFailure); !ok {
		t.Fatalf("GetObject returned %T", o.GetObject())
	}
	if _, ok := o.DeepCopyObject().(*DecodeFailure); !ok {
		t.Fatalf("DeepCopyObject returned %T", o.DeepCopyObject())
	}
	if _, err := meta.Accessor(o); err == nil {
		t.Fatal("meta.Accessor accepted an object whose content does not decode")
	}
	j := &jsonObject{o: o, TypeMeta: o.typeMeta}
	if _, err := j.Content(); err == nil || j.UnstructuredContent() != nil {
		t.Fatal("the encoders' view of the object decoded it")
	}
	store := sourceStore{&ResourceStore{objects: map[contract.Key]*Object{o.key: o}}}
	if _, _, err := store.GetByKey(string(o.key)); !errors.As(err, &failure) {
		t.Fatalf("the source store's GetByKey: %v, want the DecodeFailure", err)
	}
}
