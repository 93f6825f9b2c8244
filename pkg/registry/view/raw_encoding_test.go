package view

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	goruntime "runtime"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/test/race"
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
	var fast strings.Builder
	if err := writeList(l, &fast); err != nil {
		t.Fatal(err)
	}
	checkWroteList(t, "writeList", l, fast.String())
	empty := &List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NamespaceList"}}
	fast.Reset()
	if err := writeList(empty, &fast); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fast.String(), `"items":[]`) {
		t.Errorf("an empty list: %s", fast.String())
	}
}

// TestWriteListReusesItsBuffer checks that writeList does not allocate its 32 KiB buffer per
// list: a view LIST of 120 ConfigMaps allocated 97 KB, a third of it this buffer.
func TestWriteListReusesItsBuffer(t *testing.T) {
	if race.Enabled {
		t.Skip("sync.Pool drops values at random under the race detector")
	}
	l := benchList(&testing.B{}, 3)
	const lists = 50
	if err := writeList(l, io.Discard); err != nil { // the pool's first writer
		t.Fatal(err)
	}
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	for i := 0; i < lists; i++ {
		if err := writeList(l, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	goruntime.ReadMemStats(&after)
	if perList := (after.TotalAlloc - before.TotalAlloc) / lists; perList > listBufferSize/4 {
		t.Errorf("writeList allocated %d bytes per list, want at most %d (its buffer is kept between lists)", perList, listBufferSize/4)
	}
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("connection reset") }

// TestWriteListAfterAFailedWrite checks that a writer whose response failed goes back to the pool
// clean: the next list is written whole.
func TestWriteListAfterAFailedWrite(t *testing.T) {
	big := benchList(&testing.B{}, 40) // more than the buffer, so writeList writes before the end
	if err := writeList(big, failingWriter{}); err == nil {
		t.Fatal("writeList to a failing writer returned no error")
	}
	l := benchList(&testing.B{}, 3)
	var got strings.Builder
	if err := writeList(l, &got); err != nil {
		t.Fatalf("writeList after a failed write: %v", err)
	}
	checkWroteList(t, "writeList after a failed write", l, got.String())
}

// checkWroteList checks that what wrote for l is the JSON document apimachinery's own encoder
// writes for it (the same values; spacing and member order aside).
func checkWroteList(t *testing.T, what string, l *List, wrote string) {
	t.Helper()
	var want strings.Builder
	if err := newSerializer().json.Encode(l, &want); err != nil {
		t.Fatal(err)
	}
	var a, b interface{}
	if err := json.Unmarshal([]byte(wrote), &a); err != nil {
		t.Fatalf("%s wrote invalid JSON: %v\n%s", what, err, wrote)
	}
	if err := json.Unmarshal([]byte(want.String()), &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("%s wrote\n%s\nthe JSON serializer\n%s", what, wrote, want.String())
	}
}

// spacedObject is an object that holds JSON which is valid but not compact: encoding/json
// would compact what its MarshalJSON returns, the view's encoder writes it as held.
type spacedObject struct{ metav1.TypeMeta }

const spacedJSON = `{"apiVersion": "v1", "kind": "ConfigMap"}`

func (o *spacedObject) DeepCopyObject() runtime.Object { c := *o; return &c }
func (o *spacedObject) MarshalJSON() ([]byte, error)   { return []byte(spacedJSON), nil }
func (o *spacedObject) WriteJSON(w io.Writer) (err error) {
	_, err = io.WriteString(w, spacedJSON)
	return
}

// TestRawEncodingWritesHeldBytes checks that the view's compact JSON encoder writes an object
// that holds its JSON, and a watch event of an encoded object, from those bytes as they are,
// without encoding/json scanning them again (which compacts them: the spaces would go).
func TestRawEncodingWritesHeldBytes(t *testing.T) {
	ser := newSerializer()
	enc := ser.EncoderForVersion(ser.SupportedMediaTypes()[0].Serializer, schema.GroupVersion{Version: "v1"})
	var obj strings.Builder
	if err := enc.Encode(&spacedObject{}, &obj); err != nil {
		t.Fatal(err)
	}
	if want := spacedJSON + "\n"; obj.String() != want {
		t.Errorf("the object was written as %q, want its bytes as held, %q", obj.String(), want)
	}
	var ev strings.Builder
	if err := enc.Encode(&metav1.WatchEvent{Type: "ADDED", Object: runtime.RawExtension{Raw: []byte(obj.String())}}, &ev); err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"ADDED","object":` + spacedJSON + "}\n"; ev.String() != want {
		t.Errorf("the watch event was written as %q, want %q", ev.String(), want)
	}
	// The pretty encoder still goes through encoding/json.
	pretty := ser.EncoderForVersion(ser.SupportedMediaTypes()[0].PrettySerializer, schema.GroupVersion{Version: "v1"})
	var p strings.Builder
	if err := pretty.Encode(&spacedObject{}, &p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.String(), "\n  \"kind\": \"ConfigMap\"") {
		t.Errorf("the pretty encoder wrote %q", p.String())
	}
}

// TestRawEncodingMatchesEncodingJSON checks that the view's compact JSON encoder writes a cached
// object, and the watch event the apiserver's watch encoder builds around its encoding, byte
// for byte as apimachinery's JSON serializer does; and that events it cannot write from bytes
// (an object not yet encoded, an unusual type) are still encoded.
func TestRawEncodingMatchesEncodingJSON(t *testing.T) {
	l := benchList(&testing.B{}, 1)
	ser := newSerializer()
	enc := ser.EncoderForVersion(ser.SupportedMediaTypes()[0].Serializer, schema.GroupVersion{Version: "v1"})
	var fast, slow strings.Builder
	if err := enc.Encode(l.Items[0], &fast); err != nil {
		t.Fatal(err)
	}
	if err := ser.json.Encode(l.Items[0], &slow); err != nil {
		t.Fatal(err)
	}
	if fast.String() != slow.String() {
		t.Fatalf("the object was written as\n%s\nthe JSON serializer writes\n%s", fast.String(), slow.String())
	}
	for _, ev := range []*metav1.WatchEvent{
		{Type: "MODIFIED", Object: runtime.RawExtension{Raw: []byte(fast.String())}},
		{Type: "BOOKMARK", Object: runtime.RawExtension{Raw: []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"12"}}`)}},
		{Type: "ADDED", Object: runtime.RawExtension{Object: l.Items[0]}},
		{Type: "ODD TYPE", Object: runtime.RawExtension{Raw: []byte(`{}`)}},
	} {
		var fast, slow strings.Builder
		if err := enc.Encode(ev, &fast); err != nil {
			t.Fatal(err)
		}
		if err := ser.json.Encode(ev, &slow); err != nil {
			t.Fatal(err)
		}
		if fast.String() != slow.String() {
			t.Errorf("the %s event was written as\n%s\nthe JSON serializer writes\n%s", ev.Type, fast.String(), slow.String())
		}
	}
}

// BenchmarkEncodeWatchEvent measures writing one watch event of a cached ConfigMap (about
// 1.5 KiB) as the apiserver's watch encoder does on the first watcher of an object version
// (CacheEncode keeps the result for the others): the object with the embedded encoder, then
// the event around it. "view" is the view's encoder, "encoding-json" apimachinery's JSON
// serializer on the same object.
func BenchmarkEncodeWatchEvent(b *testing.B) {
	obj := benchList(b, 1).Items[0]
	ser := newSerializer()
	for _, c := range []struct {
		name string
		enc  runtime.Encoder
	}{
		{"view", ser.EncoderForVersion(ser.SupportedMediaTypes()[0].Serializer, schema.GroupVersion{Version: "v1"})},
		{"encoding-json", ser.json},
	} {
		b.Run(c.name, func(b *testing.B) {
			var embedded, frame bytes.Buffer
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				embedded.Reset()
				frame.Reset()
				if err := c.enc.Encode(obj, &embedded); err != nil {
					b.Fatal(err)
				}
				ev := &metav1.WatchEvent{Type: "MODIFIED", Object: runtime.RawExtension{Raw: embedded.Bytes()}}
				if err := c.enc.Encode(ev, &frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
