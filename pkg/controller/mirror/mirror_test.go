package mirror

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	discoveryfake "k8s.io/client-go/discovery/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-mapper/cluster-mapper/pkg/clusterinformer"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// object is a ConfigMap's metadata: assigned to locations, with a status record of east, an
// outcome record of west, a label and an annotation no reader of the mirror reads.
func object(ns, name string, locations string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7",
			Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{
				contract.AssignedLocationsAnnotation:    locations,
				contract.StatusRecordAnnotation("east"): `{"phase":"Ready"}`,
				contract.OutcomeAnnotation("west"):      `{"reason":"Conflict"}`,
				contract.LastAppliedConfigAnnotation:    fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q},"data":{"k":%q}}`, name, strings.Repeat("v", 512)),
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1",
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{".":{},"f:k":{}},"f:metadata":{"f:labels":{".":{},"f:app":{}}}}`)}}},
			Finalizers: []string{"example.com/keep"},
		},
	}
}

// newMirror returns a Mirror of a fake source serving configmaps, holding objs.
func newMirror(t testing.TB, onChange func(schema.GroupVersionResource, contract.Key, *metav1.PartialObjectMetadata), objs ...k8sruntime.Object) (*Mirror, *metadatafake.FakeMetadataClient) {
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	meta := metadatafake.NewSimpleMetadataClient(scheme, objs...)
	disc := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}
	disc.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: metav1.Verbs{"get", "list", "watch"}},
		{Name: "configmaps/status", Namespaced: true, Kind: "ConfigMap", Verbs: metav1.Verbs{"get", "update"}},
	}}}
	return New(Config{Metadata: meta, Discovery: preferred{disc}, Clusters: clusterinformer.Clusters{Default: "root", IgnoreAnnotation: true}, Interval: time.Hour, OnChange: onChange}), meta
}

// preferred is client-go's fake discovery answering ServerPreferredResources (the fake's own
// answers nothing) with its resources.
type preferred struct{ *discoveryfake.FakeDiscovery }

func (p preferred) ServerPreferredResources() ([]*metav1.APIResourceList, error) {
	return p.Resources, nil
}

// run runs m until the test ends and waits until it has synced.
func run(t testing.TB, m *Mirror) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return m.HasSynced(), nil }); err != nil {
		t.Fatal("the mirror did not sync")
	}
}

// TestMirror: the mirror follows the resources a view's discovery lists with metadata
// informers; it keeps of each object only what its readers read, indexes objects by cluster
// and namespace, and reports every change.
func TestMirror(t *testing.T) {
	var mu sync.Mutex
	changes := map[contract.Key]int{}
	m, meta := newMirror(t, func(gvr schema.GroupVersionResource, key contract.Key, obj *metav1.PartialObjectMetadata) {
		mu.Lock()
		defer mu.Unlock()
		changes[key]++
	}, object("apps", "a", `["east","west"]`), object("apps", "b", `["east"]`), object("other", "c", `["east"]`))
	run(t, m)

	if got := fmt.Sprint(m.Resources()); got != "[/v1, Resource=configmaps]" {
		t.Fatalf("resources %s", got)
	}
	a, ok := m.Get(configMaps, contract.NewKey("root", "apps", "a"))
	if !ok {
		t.Fatal("apps/a is not in the mirror")
	}
	if len(a.Annotations) != 3 || a.Annotations[contract.AssignedLocationsAnnotation] != `["east","west"]` || a.Annotations[contract.StatusRecordAnnotation("east")] == "" ||
		a.Annotations[contract.OutcomeAnnotation("west")] == "" ||
		a.ManagedFields != nil || a.Finalizers != nil || a.Labels["app"] != "web" || a.UID != "uid-a" || a.ResourceVersion != "7" {
		t.Errorf("apps/a is kept as %+v", a.ObjectMeta)
	}
	if n := len(m.InNamespace(configMaps, "root", "apps")); n != 2 {
		t.Errorf("%d objects in root|apps, want 2", n)
	}
	cands := m.Candidates("root", "apps")
	if len(cands) != 2 || cands[0].GVR != configMaps {
		t.Fatalf("candidates %+v", cands)
	}

	if _, err := meta.Resource(configMaps).Namespace("apps").(metadatafake.MetadataClient).CreateFake(object("apps", "d", `["west"]`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return changes[contract.NewKey("root", "apps", "d")] == 1, nil
	}); err != nil {
		t.Fatalf("no change reported for apps/d: %v", changes)
	}
}

// BenchmarkMirrorHeap measures what the mirror keeps per source object: the heap in use after
// b.N objects' metadata (each with a status record, a label, the assignment, and the
// managedFields, finalizer and last-applied-configuration that trim drops) went into an
// informer store with the mirror's key, index and transform, divided by b.N; and the same
// without the transform (what a plain metadata informer keeps).
// `go test ./pkg/controller/mirror -run XXX -bench BenchmarkMirrorHeap -benchtime 50000x`.
func BenchmarkMirrorHeap(b *testing.B) {
	clusters := clusterinformer.Clusters{Default: "root", IgnoreAnnotation: true}
	for _, c := range []struct {
		name      string
		transform func(interface{}) (interface{}, error)
	}{
		{"trimmed", trim},
		{"untrimmed", func(obj interface{}) (interface{}, error) { return obj, nil }},
	} {
		b.Run(c.name, func(b *testing.B) {
			store := cache.NewIndexer(clusterinformer.KeyFunc(clusters), indexers(clusters))
			before := heapInUse()
			for i := 0; i < b.N; i++ {
				obj, _ := c.transform(object(fmt.Sprintf("ns-%d", i%100), fmt.Sprintf("object-%06d", i), `["east","west"]`))
				if err := store.Add(obj); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(heapInUse()-before)/float64(b.N), "B/object")
			runtime.KeepAlive(store)
		})
	}
}

// heapInUse returns the bytes of live heap objects after a garbage collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
