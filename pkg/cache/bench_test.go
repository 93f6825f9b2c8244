package cache

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// benchStore returns a synced store with total objects: perTarget of them assigned to
// "target", the others spread over 1000 other locations.
func benchStore(b *testing.B, total, perTarget int) *ResourceStore {
	s := newTestStore(b, StoreOptions{})
	objs := make([]*unstructured.Unstructured, 0, total)
	for i := 0; i < total; i++ {
		loc := fmt.Sprintf("loc-%d", i%1000)
		if i%(total/perTarget) == 0 {
			loc = "target"
		}
		objs = append(objs, cm(fmt.Sprintf("ns-%d", i%50), fmt.Sprintf("obj-%d", i), uint64(i+1), locs(loc)))
	}
	mustReplace(b, s, uint64(total+1), objs...)
	return s
}

// BenchmarkList lists one location of 100 objects while the cache holds 10k or 100k objects:
// the cost must not grow with the total.
func BenchmarkList(b *testing.B) {
	for _, total := range []int{10_000, 100_000} {
		s := benchStore(b, total, 100)
		b.Run(fmt.Sprintf("total=%d", total), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				res, err := s.List("target", ListOptions{})
				if err != nil || len(res.Items) != 100 {
					b.Fatalf("%d items, %v", len(res.Items), err)
				}
			}
		})
		b.Run(fmt.Sprintf("total=%d/page=10", total), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				res, err := s.List("target", ListOptions{Limit: 10})
				if err != nil || len(res.Items) != 10 || !res.More {
					b.Fatalf("%d items, %v", len(res.Items), err)
				}
			}
		})
		b.Run(fmt.Sprintf("total=%d/get", total), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, _, ok := s.Get("target", "ns-0", "obj-0"); !ok {
					b.Fatal("not found")
				}
			}
		})
	}
}

// nextVersion returns a new version of the ConfigMap u at resourceVersion rv, which differs
// from u only there: a shallow copy with a metadata map of its own, so the copy costs little
// next to the store's work.
func nextVersion(u *unstructured.Unstructured, rv uint64) *unstructured.Unstructured {
	md := map[string]interface{}{}
	for k, x := range u.Object["metadata"].(map[string]interface{}) {
		md[k] = x
	}
	md["resourceVersion"] = strconv.FormatUint(rv, 10)
	return &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md}}
}

// BenchmarkDispatch measures the ingest cost of one event for an object of "target" (which
// has one watcher, drained) while 0, 100 or 1000 watchers watch other locations: the cost must
// stay flat.
func BenchmarkDispatch(b *testing.B) {
	for _, unrelated := range []int{0, 100, 1000} {
		b.Run(fmt.Sprintf("unrelatedWatchers=%d", unrelated), func(b *testing.B) {
			s := benchStore(b, 10_000, 100)
			for i := 0; i < unrelated; i++ {
				mustWatch(b, s, fmt.Sprintf("loc-%d", i%1000), WatchOptions{})
			}
			w := mustWatch(b, s, "target", WatchOptions{})
			go func() {
				for range w.ResultChan() {
				}
			}()
			u := cm("ns-0", "obj-0", 0, locs("target"))
			rv := uint64(20_000)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rv++
				if err := s.Update(nextVersion(u, rv)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFanOut measures delivering one source write to 100 watchers of its location, each
// read by a consumer goroutine of its own as the apiserver's watch handler reads it: from the
// store's Update until every consumer received the event. The hand-over from the dispatcher to
// the consumers is what it adds to BenchmarkDispatch (one watcher).
func BenchmarkFanOut(b *testing.B) {
	const watchers = 100
	s := benchStore(b, 10_000, 100)
	var received sync.WaitGroup
	for i := 0; i < watchers; i++ {
		w := mustWatch(b, s, "target", WatchOptions{})
		defer w.Stop()
		go func() {
			for e := range w.ResultChan() {
				if e.Type != watch.Bookmark {
					received.Done()
				}
			}
		}()
	}
	u := cm("ns-0", "obj-0", 0, locs("target"))
	rv := uint64(20_000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rv++
		received.Add(watchers)
		if err := s.Update(nextVersion(u, rv)); err != nil {
			b.Fatal(err)
		}
		received.Wait()
	}
}

// watchFrameEncoder imitates the apiserver's watch encoder: the object is encoded by the JSON
// serializer the views use (k8s.io/apimachinery's, as registry/view configures it), embedded in
// a metav1.WatchEvent and the frame encoded again (handlers/response.go watchEncoder.doEncode).
func watchFrameEncoder(eventType watch.EventType) func(runtime.Object, io.Writer) error {
	s := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, nil, nil, kjson.SerializerOptions{StreamingCollectionsEncoding: true})
	return func(obj runtime.Object, w io.Writer) error {
		var buf bytes.Buffer
		if err := s.Encode(obj, &buf); err != nil {
			return err
		}
		return json.NewEncoder(w).Encode(&metav1.WatchEvent{Type: string(eventType), Object: runtime.RawExtension{Raw: buf.Bytes()}})
	}
}

// BenchmarkEncodeEvent encodes one event for 1 or 100 watchers of the same location. With
// CacheEncode (as the apiserver calls it on our *Object) the object is encoded once and the
// other watchers copy the cached frame; "uncached" encodes for every watcher, for contrast.
func BenchmarkEncodeEvent(b *testing.B) {
	base := cm("ns", "obj", 1, locs("east"), "l:app=x", "d:payload="+string(bytes.Repeat([]byte("x"), 2000)))
	enc := watchFrameEncoder(watch.Modified)
	id := runtime.Identifier(`{"name":"watch","encoder":"json","eventType":"MODIFIED"}`)
	for _, watchers := range []int{1, 100} {
		b.Run(fmt.Sprintf("cached/watchers=%d", watchers), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				o := newObject("root|ns/obj", "root", "ns", "obj", []string{"east"}, uint64(i), base)
				for j := 0; j < watchers; j++ {
					if err := o.CacheEncode(id, enc, io.Discard); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run(fmt.Sprintf("uncached/watchers=%d", watchers), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				for j := 0; j < watchers; j++ {
					if err := enc(base, io.Discard); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// benchObjectsJSON returns total ConfigMaps like make bench's (about 1.5 KiB of JSON each,
// data, labels and annotations, assigned to 1-3 of 1000 locations), as the source sends them
// (with managedFields), and their total size.
func benchObjectsJSON(b *testing.B, total int) (raws [][]byte, jsonBytes int) {
	raws = make([][]byte, total)
	for i := range raws {
		var ls []string
		for j := 0; j <= i%3; j++ {
			ls = append(ls, fmt.Sprintf("loc-%03d", (i*7+j*13)%1000))
		}
		extra := []string{"a:owner=team-" + strconv.Itoa(i%50), "l:app=bench"}
		for _, l := range ls {
			extra = append(extra, "l:bench.kcp.io/loc-"+l+"=true")
		}
		u := cm(fmt.Sprintf("ns-%d", i%100), fmt.Sprintf("cm-%05d", i), uint64(i+1), locs(ls...), extra...)
		data := map[string]interface{}{}
		for k := 0; k < 12; k++ {
			data[fmt.Sprintf("key-%02d", k)] = string(bytes.Repeat([]byte{'a' + byte(k)}, 100))
		}
		u.Object["data"] = data
		u.SetUID(types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)))
		u.SetCreationTimestamp(metav1.Now())
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "bench", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{".":{},"f:key-00":{}},"f:metadata":{"f:annotations":{".":{},"f:owner":{}}}}`)}}})
		raw, err := u.MarshalJSON()
		if err != nil {
			b.Fatal(err)
		}
		raws[i] = raw
		jsonBytes += len(raw)
	}
	return raws, jsonBytes
}

// ingestPaths are the two ways objects reach a store: decoded into trees, as a dynamic client
// reads them, and as bytes with their metadata, as the source's object client reads them on a
// plain source (source.DecodeObject, adding kcp.io/cluster).
var ingestPaths = []struct {
	name   string
	decode func([]byte) (interface{}, error)
}{
	{"decoded", func(raw []byte) (interface{}, error) {
		u := &unstructured.Unstructured{}
		return u, u.UnmarshalJSON(raw)
	}},
	{"bytes", func(raw []byte) (interface{}, error) {
		// As mapper-apiserver's object client on a plain source: kcp.io/cluster added.
		return source.DecodeObject(raw, source.Annotation{Key: contract.ClusterAnnotation, Value: "root"})
	}},
}

// ingest decodes raws (one object's JSON each) with decode and stores them in a new store with
// one Replace, as a first list.
func ingest(b *testing.B, decode func([]byte) (interface{}, error), raws [][]byte) *ResourceStore {
	return ingestWith(b, decode, raws, nil)
}

// ingestWith is ingest into a store that renders with rules (nil: none).
func ingestWith(b *testing.B, decode func([]byte) (interface{}, error), raws [][]byte, rules Rules) *ResourceStore {
	s := newTestStore(b, StoreOptions{})
	if rules != nil {
		s.SetRules(rules, 0)
	}
	items := make([]interface{}, len(raws))
	for i, raw := range raws {
		var err error
		if items[i], err = decode(raw); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Replace(items, strconv.Itoa(len(raws)+1)); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkIngest measures the decoding of 10,000 objects as the source sent them and their
// Replace into a store (a first list), per object, for both ingest paths, and for the bytes
// path once more with every object carrying the finalizers of its locations, as after their
// mappers added them (the deletion protocol): objects of several locations stay templates of
// their bytes with a finalizers hole (template.go), and "templates" reports how many of the
// objects of several locations are. The bytes path runs once more with the rules a server
// without Customizations renders with, in the Open and the Bound location-access modes
// (benchRules).
func BenchmarkIngest(b *testing.B) {
	const total = 10_000
	raws, _ := benchObjectsJSON(b, total)
	run := func(name string, decode func([]byte) (interface{}, error), in [][]byte, rules Rules) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			templates, several := 0, 0
			for n := 0; n < b.N; n++ {
				s := ingestWith(b, decode, in, rules)
				if n == 0 {
					for _, o := range s.objects {
						if len(o.assigned) > 1 {
							several++
							if o.hole.end > 0 {
								templates++
							}
						}
					}
				}
				s.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*total), "ns/object")
			b.ReportMetric(float64(templates)/float64(max(several, 1)), "templates")
		})
	}
	for _, path := range ingestPaths {
		run(path.name, path.decode, raws, nil)
	}
	run("bytes-finalized", ingestPaths[1].decode, withLocationFinalizers(b, raws), nil)
	for _, mode := range []locationbinding.Mode{locationbinding.ModeOpen, locationbinding.ModeBound} {
		run("bytes/"+string(mode), ingestPaths[1].decode, raws, benchRules(b, mode))
	}
}

// benchRules returns the rules of a server without Customizations over benchObjectsJSON's
// 1,000 locations, all registered: in the Bound mode, each of the objects' 100 namespaces has
// a LocationBinding that binds every registered location (an empty selector), so that every
// assignment is bound and the views are those of the Open mode.
func benchRules(b *testing.B, mode locationbinding.Mode) Rules {
	var locs []customization.Location
	var registered []locationbinding.Location
	for i := range 1000 {
		l := fmt.Sprintf("loc-%03d", i)
		locs = append(locs, customization.Location{Name: l, Labels: map[string]string{"zone": strconv.Itoa(i % 10)}})
		registered = append(registered, locationbinding.Location{Name: l, Labels: locs[i].Labels})
	}
	s, errs := customization.NewCompiler(customization.Options{PlainCluster: "root"}).Snapshot(1, nil, locs)
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	if mode == locationbinding.ModeOpen {
		return s
	}
	var bindings []*locationbinding.Binding
	for i := range 100 {
		bindings = append(bindings, locationbinding.Compile(locationbinding.Key{Cluster: "root", Namespace: fmt.Sprintf("ns-%d", i), Name: "all"},
			&controlv1alpha1.LocationBindingSpec{LocationSelector: &metav1.LabelSelector{}}))
	}
	return s.WithBindings(locationbinding.NewIndex(bindings, registered))
}

// withLocationFinalizers returns raws with each object carrying the finalizers of its
// locations (locations.mapper.kcp.io/<location>), after another controller's.
func withLocationFinalizers(b *testing.B, raws [][]byte) [][]byte {
	out := make([][]byte, len(raws))
	for i, raw := range raws {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			b.Fatal(err)
		}
		locs, err := contract.ParseLocations(u.GetAnnotations()[contract.AssignedLocationsAnnotation])
		if err != nil {
			b.Fatal(err)
		}
		fins := []string{"example.com/protect"}
		for _, l := range locs {
			fins = append(fins, contract.LocationFinalizer(l))
		}
		u.SetFinalizers(fins)
		if out[i], err = u.MarshalJSON(); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// collectedHeap returns the live heap (HeapAlloc) and the bytes of the heap's in-use spans
// (HeapInuse: live objects and the free space between them), after two forced garbage
// collections (the second frees what the first's finalizers released).
func collectedHeap() (alloc, inuse uint64) {
	var m goruntime.MemStats
	goruntime.GC()
	goruntime.GC()
	goruntime.ReadMemStats(&m)
	return m.HeapAlloc, m.HeapInuse
}

// BenchmarkStoreHeap measures the heap a store holds per object, after a forced garbage
// collection, for 10,000 ConfigMaps like make bench's (benchObjectsJSON), for both ingest paths
// (ingestPaths). It reports heap-B/object and heap/json (the live heap over the objects' JSON
// bytes; the target for the whole process RSS is ≤ 2), and inuse/json (the heap's
// in-use spans: live objects and the free space between them).
func BenchmarkStoreHeap(b *testing.B) {
	const total = 10_000
	raws, jsonBytes := benchObjectsJSON(b, total)
	for _, path := range ingestPaths {
		b.Run(path.name, func(b *testing.B) {
			for n := 0; n < b.N; n++ {
				before, beforeInuse := collectedHeap()
				s := ingest(b, path.decode, raws)
				after, afterInuse := collectedHeap()
				held := float64(after - before)
				b.ReportMetric(held/total, "heap-B/object")
				b.ReportMetric(held/float64(jsonBytes), "heap/json")
				// Memory in spans with live objects: the live heap plus fragmentation.
				b.ReportMetric(float64(afterInuse-beforeInuse)/float64(jsonBytes), "inuse/json")
				goruntime.KeepAlive(s)
				s.Close()
			}
		})
	}
}

// BenchmarkIdleWatchMemory measures the memory one idle view watch holds in the store: 1,000
// watches (one per location, with bookmarks, as client-go's reflectors ask) on a store of
// 10,000 objects, after their initial events were consumed. It reports the Go heap and the
// goroutine stacks per watch (RSS per idle watch ≤ 16 KiB for the whole
// server, HTTP serving included).
func BenchmarkIdleWatchMemory(b *testing.B) {
	const watches = 1000
	s := benchStore(b, 10_000, 100)
	mem := func() uint64 {
		var m goruntime.MemStats
		goruntime.GC()
		goruntime.GC()
		goruntime.ReadMemStats(&m)
		return m.HeapAlloc + m.StackInuse
	}
	for n := 0; n < b.N; n++ {
		before := mem()
		ws := make([]watch.Interface, watches)
		for i := range ws {
			ws[i] = mustWatch(b, s, fmt.Sprintf("loc-%d", i), WatchOptions{AllowBookmarks: true, ResourceVersion: s.ResourceVersion()})
		}
		after := mem()
		b.ReportMetric(float64(after-before)/watches, "B/watch")
		for _, w := range ws {
			w.Stop()
		}
	}
}

// BenchmarkUpdate measures the store's side of one source write, as make bench's writes make
// them (scenario 2): a ConfigMap of a store of 10,000 (benchObjectsJSON: 1-3 locations each)
// arrives as the source's object client reads it (source.DecodeObject included) with its data
// changed ("data"), with its data changed and metadata.generation moved ("generation", as a
// Deployment's annotation writes move it), or with its assignment moved to two other locations
// ("reassign"). No watcher is open, as in the baseline phase of scenario 2.
func BenchmarkUpdate(b *testing.B) {
	const total = 10_000
	raws, _ := benchObjectsJSON(b, total)
	add := source.Annotation{Key: contract.ClusterAnnotation, Value: "root"}
	const generationMark = "987654321"
	kinds := []string{"data", "generation", "reassign"}
	for _, kind := range append(kinds, "data/Open", "data/Bound", "reassign/Open", "reassign/Bound") {
		b.Run(kind, func(b *testing.B) {
			var rules Rules
			kind, mode, _ := strings.Cut(kind, "/")
			if mode != "" {
				rules = benchRules(b, locationbinding.Mode(mode))
			}
			s := ingestWith(b, ingestPaths[1].decode, raws, rules)
			defer s.Close()
			writes := make([][]byte, 1000)
			for i := range writes {
				u := &unstructured.Unstructured{}
				if err := u.UnmarshalJSON(raws[(i*7919)%total]); err != nil {
					b.Fatal(err)
				}
				switch kind {
				case "generation":
					u.SetGeneration(987654321) // generationMark, replaced below
					fallthrough
				case "data":
					u.Object["data"].(map[string]interface{})["key-00"] = "@REV@"
				default:
					// Two locations that change with every write (@A@, @B@ below).
					ann := u.GetAnnotations()
					ann[contract.AssignedLocationsAnnotation] = `["loc-@A@","loc-@B@"]`
					u.SetAnnotations(ann)
				}
				u.SetResourceVersion("@RV@")
				raw, err := u.MarshalJSON()
				if err != nil {
					b.Fatal(err)
				}
				writes[i] = raw
			}
			rv := uint64(total + 10)
			b.ReportAllocs()
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				rv++
				w := bytes.Replace(writes[n%len(writes)], []byte("@RV@"), strconv.AppendUint(nil, rv, 10), 1)
				// Every data write changes the data (the same value again would change nothing).
				w = bytes.Replace(w, []byte("@REV@"), strconv.AppendUint(nil, rv, 10), 1)
				w = bytes.Replace(w, []byte(generationMark), strconv.AppendUint(nil, rv, 10), 1)
				// Every re-assignment moves the object to two other locations.
				// (the same object comes again 1,000 writes later, then to the next two).
				a := (rv + rv/1000) % 1000
				w = bytes.Replace(w, []byte("@A@"), fmt.Appendf(nil, "%03d", a), 1)
				w = bytes.Replace(w, []byte("@B@"), fmt.Appendf(nil, "%03d", (a+500)%1000), 1)
				o, err := source.DecodeObject(w, add)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Update(o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
