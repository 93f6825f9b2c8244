package cache

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	discoveryfake "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cluster-mapper/cluster-mapper/pkg/source"
	"github.com/cluster-mapper/cluster-mapper/pkg/source/sourcetest"
)

// TestCacheMirrorsAndFollowsDiscovery wires the Cache with client-go's fake dynamic and
// discovery clients: the reflector fills the store, watch events flow, and a resource that
// leaves discovery is stopped with its watches ended.
func TestCacheMirrorsAndFollowsDiscovery(t *testing.T) {
	scheme := runtime.NewScheme()
	cmGVR := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	depGVR := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		cmGVR:                             "ConfigMapList",
		depGVR:                            "DeploymentList",
		{Version: "v1", Resource: "pods"}: "PodList",
	}, cm("ns", "a", 5, locs("east")), cm("ns", "b", 6, locs("west")))
	disc := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}
	var discMu sync.Mutex
	setResources := func(l ...*metav1.APIResourceList) {
		discMu.Lock()
		defer discMu.Unlock()
		disc.Resources = l
	}
	disc.AddReactor("*", "*", func(clienttesting.Action) (bool, runtime.Object, error) { return false, nil, nil })
	setResources(sourcetest.CoreV1, sourcetest.AppsV1)

	c, err := New(Config{Source: newSource(t, dyn, lockedDiscovery{disc, &discMu}), DiscoveryInterval: 20 * time.Millisecond, Store: StoreOptions{DefaultCluster: "root"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := runCache(t, c)

	waitFor(t, "cache synced", c.HasSynced)
	if s := fmt.Sprint(resourceNames(c.Resources())); s != "[configmaps pods deployments.apps]" {
		t.Fatalf("resources %s", s)
	}
	store, ok := c.Store(cmGVR)
	if !ok {
		t.Fatal("no configmaps store")
	}
	res, _ := store.List("east", ListOptions{})
	if names(res.Items) != "a" {
		t.Fatalf("east list: %s", names(res.Items))
	}
	w := mustWatch(t, store, "east", WatchOptions{})
	if _, err := dyn.Resource(cmGVR).Namespace("ns").Update(ctx, cm("ns", "b", 7, locs("west", "east")), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, w, "ADDED b@7")
	if st := c.Locations()["east"]; st.Objects != 2 || st.Watchers != 1 || st.Resources[cmGVR.GroupResource()] != 2 {
		t.Fatalf("locations %+v", c.Locations())
	}

	depStore, _ := c.Store(depGVR)
	dw := mustWatch(t, depStore, "east", WatchOptions{})
	setResources(sourcetest.CoreV1)
	waitFor(t, "deployments removed", func() bool { _, ok := c.Store(depGVR); return !ok })
	expectClosed(t, dw)
	setResources(sourcetest.CoreV1, sourcetest.AppsV1)
	waitFor(t, "deployments back", func() bool { _, ok := c.Store(depGVR); return ok })
}

// runCache runs c until the test ends (and waits for Run to return then); the context it
// runs with is returned.
func runCache(t *testing.T, c *Cache) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-runDone })
	return ctx
}

// lockedDiscovery serializes the test's changes of the fake's resources with its reads.
type lockedDiscovery struct {
	*discoveryfake.FakeDiscovery
	mu *sync.Mutex
}

func (d lockedDiscovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.FakeDiscovery.ServerGroupsAndResources()
}

// waitFor waits (at most 10 s) until cond holds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// newSource returns the source.Source of the cache tests, over client-go's fake clients.
func newSource(t *testing.T, dyn dynamic.Interface, disc discovery.DiscoveryInterface) *source.Source {
	t.Helper()
	s, err := source.New(source.Config{Dynamic: dyn, Discovery: disc})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// resourceNames returns the group resources of infos, in their order.
func resourceNames(infos []source.ResourceInfo) []string {
	out := make([]string, len(infos))
	for i, info := range infos {
		out[i] = info.GVR.GroupResource().String()
	}
	return out
}
