package cache

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	discoveryfake "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cluster-mapper/cluster-mapper/pkg/source/sourcetest"
)

// fenceSource is a Source whose current resourceVersion the test sets, and which counts the
// probes of its resourceVersion and the lists and watches of the resources.
type fenceSource struct {
	Source
	rv     atomic.Uint64
	probes atomic.Int32
	reads  atomic.Int32
}

func (s *fenceSource) ResourceVersion(context.Context, schema.GroupVersionResource) (uint64, error) {
	s.probes.Add(1)
	return s.rv.Load(), nil
}

func (s *fenceSource) List(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (runtime.Object, error) {
	s.reads.Add(1)
	return s.Source.List(ctx, gvr, opts)
}

func (s *fenceSource) Watch(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (watch.Interface, error) {
	s.reads.Add(1)
	return s.Source.Watch(ctx, gvr, opts)
}

// TestFenceWaitsForTheSourceToMove: with FenceTimeout, Run lists nothing until the source's
// resourceVersion has moved past the one it read at start-up (the previous run of the server
// handed out none above that one), and lists once it has; a source that does not move within
// the timeout is listed anyway. Fails without the fence: the lists started at once.
func TestFenceWaitsForTheSourceToMove(t *testing.T) {
	for _, moves := range []bool{true, false} {
		t.Run(map[bool]string{true: "moves", false: "times out"}[moves], func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
				{Version: "v1", Resource: "configmaps"}: "ConfigMapList",
				{Version: "v1", Resource: "pods"}:       "PodList",
			}, cm("ns", "a", 5, locs("east")))
			disc := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}
			disc.Resources = []*metav1.APIResourceList{sourcetest.CoreV1}
			src := &fenceSource{Source: newSource(t, dyn, disc)}
			src.rv.Store(5)
			timeout := 20 * time.Second
			if !moves {
				timeout = 500 * time.Millisecond
			}
			c, err := New(Config{Source: src, Store: StoreOptions{DefaultCluster: "root"}, FenceTimeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			runCache(t, c)

			start := time.Now()
			if moves {
				// The fence read the resourceVersion a few times (the source did not move).
				waitFor(t, "three probes", func() bool { return src.probes.Load() >= 3 })
				if n := src.reads.Load(); n != 0 || c.HasSynced() {
					t.Fatalf("%d lists or watches (synced %v) before the source moved", n, c.HasSynced())
				}
				src.rv.Store(6)
			}
			waitFor(t, "cache synced", c.HasSynced)
			if !moves && time.Since(start) < timeout {
				t.Fatalf("synced after %v, before the fence's timeout %v", time.Since(start), timeout)
			}
		})
	}
}
