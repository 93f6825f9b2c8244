package mapper

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-mapper/cluster-mapper/pkg/clusterinformer"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// The shape of TestLogicalClusters: 50 clusters, 2,000 objects in all, the same
// namespace/name in every cluster.
const (
	benchClusters = 50
	benchObjects  = 2000
)

// benchSource is a fake view of one resource: it serves the list of one cluster (or of all,
// for cluster "") and a watch that stays open without events, and counts the requests, i.e.
// the list and watch connections an informer opens on the server. Lists return deep copies,
// as decoding a response would, so that each informer holds objects of its own.
type benchSource struct {
	byCluster      map[string][]*unstructured.Unstructured
	lists, watches atomic.Int64
}

func newBenchSource() *benchSource {
	s := &benchSource{byCluster: map[string][]*unstructured.Unstructured{}}
	perCluster := benchObjects / benchClusters
	for c := 0; c < benchClusters; c++ {
		cluster := fmt.Sprintf("cluster-%02d", c)
		for i := 0; i < perCluster; i++ {
			s.byCluster[cluster] = append(s.byCluster[cluster], &unstructured.Unstructured{Object: map[string]interface{}{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]interface{}{
					"namespace": fmt.Sprintf("team-%d", i%4), "name": fmt.Sprintf("config-%d", i),
					"uid": fmt.Sprintf("%s-%d", cluster, i), "resourceVersion": "10",
					"annotations": map[string]interface{}{contract.ClusterAnnotation: cluster, contract.AssignedLocationsAnnotation: `["east"]`},
				},
				"data": map[string]interface{}{"key": "a value of some forty bytes, like most"},
			}})
		}
	}
	return s
}

// clusters returns the cluster names.
func (s *benchSource) clusters() []string {
	out := make([]string, 0, len(s.byCluster))
	for c := range s.byCluster {
		out = append(out, c)
	}
	return out
}

// listWatch returns the ListWatch of cluster's path ("" for the all-clusters path). Both store
// designs use it without streaming lists (clusterinformer.WithoutStreamingLists): they list,
// then watch, so they compare on equal terms.
func (s *benchSource) listWatch(cluster string) *cache.ListWatch {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (kruntime.Object, error) {
			s.lists.Add(1)
			list := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMapList"}}
			list.SetResourceVersion("10")
			for c, objs := range s.byCluster {
				if cluster != "" && c != cluster {
					continue
				}
				for _, o := range objs {
					list.Items = append(list.Items, *o.DeepCopy())
				}
			}
			return list, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			s.watches.Add(1)
			return watch.NewFake(), nil
		},
	}
	return lw
}

// benchStore is one design of the mapper's view store for one resource.
type benchStore interface {
	run(ctx context.Context, wg *sync.WaitGroup)
	synced() bool
	len() int
}

// clusterKeyedStore is the mapper's design: one Reflector+DeltaFIFO+Indexer on the
// all-clusters path with the cluster-aware key (clusterinformer.Informer).
type clusterKeyedStore struct{ vi *clusterinformer.Informer }

func (s *clusterKeyedStore) run(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() { defer wg.Done(); s.vi.Run(ctx) }()
}
func (s *clusterKeyedStore) synced() bool { return s.vi.HasSynced() }
func (s *clusterKeyedStore) len() int     { return len(s.vi.GetStore().ListKeys()) }

// perClusterStore is the alternative: one SharedIndexInformer per logical cluster on its
// /clusters/<cluster> path, each with the mapper's one event handler.
type perClusterStore struct{ informers []cache.SharedIndexInformer }

func (s *perClusterStore) run(ctx context.Context, wg *sync.WaitGroup) {
	for _, inf := range s.informers {
		wg.Add(1)
		go func() { defer wg.Done(); inf.RunWithContext(ctx) }()
	}
}
func (s *perClusterStore) synced() bool {
	for _, inf := range s.informers {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}
func (s *perClusterStore) len() int {
	n := 0
	for _, inf := range s.informers {
		n += len(inf.GetStore().ListKeys())
	}
	return n
}

// BenchmarkViewStore compares the two designs of the mapper's view store for one resource of
// a view with 50 logical clusters and 2,000 objects: time to sync (ns/op), allocations
// (-benchmem), and per run the heap the running store retains (retained-bytes), the goroutines
// it runs (goroutines), the CPU time the process spent until the store synced (cpu-ns; less
// sensitive than ns/op to other processes on a busy machine), and its list requests (lists) and watch requests (watches, each a watch
// held open on the server for as long as the mapper runs).
//
//	go test ./pkg/mapper -run '^$' -bench BenchmarkViewStore -benchmem -count 3
func BenchmarkViewStore(b *testing.B) {
	src := newBenchSource()
	handler := cache.ResourceEventHandlerFuncs{AddFunc: func(interface{}) {}, UpdateFunc: func(_, _ interface{}) {}, DeleteFunc: func(interface{}) {}}
	designs := []struct {
		name string
		make func() benchStore
	}{
		{"cluster-keyed-reflector", func() benchStore {
			return &clusterKeyedStore{vi: clusterinformer.New(src.listWatch(""), handler,
				clusterinformer.Options{Description: "bench", Clusters: clusterinformer.Clusters{Default: DefaultClusterName}})}
		}},
		{"informer-per-cluster", func() benchStore {
			s := &perClusterStore{}
			for _, c := range src.clusters() {
				inf := cache.NewSharedIndexInformerWithOptions(clusterinformer.WithoutStreamingLists(src.listWatch(c)), &unstructured.Unstructured{}, cache.SharedIndexInformerOptions{})
				if _, err := inf.AddEventHandler(handler); err != nil {
					b.Fatal(err)
				}
				s.informers = append(s.informers, inf)
			}
			return s
		}},
	}
	for _, d := range designs {
		b.Run(d.name, func(b *testing.B) {
			var retained, goroutines, lists, watches, cpu float64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				g0 := runtime.NumGoroutine()
				l0, w0 := src.lists.Load(), src.watches.Load()
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				cpu0 := processCPU(b)
				b.StartTimer()

				s := d.make()
				s.run(ctx, &wg)
				for !s.synced() {
					time.Sleep(100 * time.Microsecond)
				}

				b.StopTimer()
				cpu += float64(processCPU(b) - cpu0)
				if n := s.len(); n != benchObjects {
					b.Fatalf("the store holds %d objects, want %d", n, benchObjects)
				}
				// Wait for every watch to be open (they open right after the lists).
				for src.watches.Load()-w0 < src.lists.Load()-l0 {
					time.Sleep(100 * time.Microsecond)
				}
				runtime.GC()
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				retained += float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
				goroutines += float64(runtime.NumGoroutine() - g0)
				lists += float64(src.lists.Load() - l0)
				watches += float64(src.watches.Load() - w0)
				runtime.KeepAlive(s)
				cancel()
				wg.Wait()
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(retained/n, "retained-bytes")
			b.ReportMetric(goroutines/n, "goroutines")
			b.ReportMetric(cpu/n, "cpu-ns")
			b.ReportMetric(lists/n, "lists")
			b.ReportMetric(watches/n, "watches")
		})
	}
}

// processCPU returns the user and system CPU time the process has used so far, in ns.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
