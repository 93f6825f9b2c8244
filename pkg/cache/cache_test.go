package cache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	discoveryfake "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
)

var (
	cmList = &metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", Kind: "ConfigMap", SingularName: "configmap", Namespaced: true, ShortNames: []string{"cm"}, Verbs: []string{"get", "list", "watch", "create"}},
		{Name: "events", Kind: "Event", Namespaced: true, Verbs: []string{"get", "list", "watch"}},
		{Name: "nodes", Kind: "Node", Namespaced: false, Verbs: []string{"get", "list", "watch"}},
		{Name: "bindings", Kind: "Binding", Namespaced: true, Verbs: []string{"create"}},
		{Name: "pods", Kind: "Pod", Namespaced: true, Verbs: []string{"get", "list", "watch"}},
		{Name: "pods/status", Kind: "Pod", Namespaced: true, Verbs: []string{"get", "patch", "update"}},
	}}
	appsList = &metav1.APIResourceList{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
		{Name: "deployments", Kind: "Deployment", SingularName: "deployment", Namespaced: true, Categories: []string{"all"}, Verbs: []string{"get", "list", "watch"}},
		{Name: "deployments/status", Kind: "Deployment", Namespaced: true, Verbs: []string{"get", "patch", "update"}},
	}}
	leasesList = &metav1.APIResourceList{GroupVersion: "coordination.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "leases", Kind: "Lease", Namespaced: true, Verbs: []string{"get", "list", "watch"}},
	}}
	eventsList = &metav1.APIResourceList{GroupVersion: "events.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "events", Kind: "Event", Namespaced: true, Verbs: []string{"get", "list", "watch"}},
	}}
	widgetsV1 = &metav1.APIResourceList{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
		{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: []string{"get", "list", "watch"}},
	}}
	widgetsV2 = &metav1.APIResourceList{GroupVersion: "example.com/v2", APIResources: []metav1.APIResource{
		{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: []string{"get", "list", "watch"}},
		{Name: "gadgets", Kind: "Gadget", Namespaced: true, Verbs: []string{"get", "list", "watch"}},
	}}
)

func gvrs(infos []ResourceInfo) []string {
	var out []string
	for _, i := range infos {
		out = append(out, i.GVR.String())
	}
	return out
}

func TestSelectResources(t *testing.T) {
	groups := []*metav1.APIGroup{
		{Name: "", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "v1", Version: "v1"}}, PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "v1", Version: "v1"}},
		{Name: "apps", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "apps/v1", Version: "v1"}}, PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "apps/v1", Version: "v1"}},
		{Name: "coordination.k8s.io", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "coordination.k8s.io/v1", Version: "v1"}}},
		{Name: "events.k8s.io", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "events.k8s.io/v1", Version: "v1"}}},
		// v1 listed first but v2 preferred: widgets at v2; a resource only in v1 would stay at v1.
		{Name: "example.com", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "example.com/v1", Version: "v1"}, {GroupVersion: "example.com/v2", Version: "v2"}}, PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "example.com/v2", Version: "v2"}},
	}
	lists := []*metav1.APIResourceList{cmList, appsList, leasesList, eventsList, widgetsV1, widgetsV2}
	got := selectResources(groups, lists, nil)
	want := "[/v1, Resource=configmaps /v1, Resource=pods apps/v1, Resource=deployments example.com/v2, Resource=gadgets example.com/v2, Resource=widgets]"
	if s := fmtList(gvrs(got)); s != want {
		t.Fatalf("default selection:\n got %s\nwant %s", s, want)
	}
	for _, i := range got {
		switch i.GVR.Resource {
		case "deployments":
			if !i.HasStatus || i.Kind != "Deployment" || i.ListKind != "DeploymentList" || i.Categories[0] != "all" || !i.Namespaced {
				t.Errorf("deployments info %+v", i)
			}
		case "configmaps":
			if i.HasStatus || i.ShortNames[0] != "cm" || i.SingularName != "configmap" {
				t.Errorf("configmaps info %+v", i)
			}
		case "pods":
			if !i.HasStatus {
				t.Errorf("pods info %+v", i)
			}
		}
	}
	// Explicit selection: cluster-scoped and default-excluded resources can be named; a resource
	// without list/watch cannot.
	got = selectResources(groups, lists, []schema.GroupResource{{Resource: "nodes"}, {Group: "coordination.k8s.io", Resource: "leases"}, {Resource: "bindings"}, {Resource: "nope"}})
	if s := fmtList(gvrs(got)); s != "[/v1, Resource=nodes coordination.k8s.io/v1, Resource=leases]" {
		t.Fatalf("explicit selection: %s", s)
	}
}

func fmtList(s []string) string {
	out := "["
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out + "]"
}

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
	setResources(cmList, appsList)

	c, err := New(Config{Dynamic: dyn, Discovery: lockedDiscovery{disc, &discMu}, DiscoveryInterval: 20 * time.Millisecond, Store: StoreOptions{DefaultCluster: "root"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); c.Run(ctx) }()
	defer func() { cancel(); <-runDone }()

	waitFor(t, "cache synced", c.HasSynced)
	if s := fmtList(gvrs(c.Resources())); s != "[/v1, Resource=configmaps /v1, Resource=pods apps/v1, Resource=deployments]" {
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
	if _, err := c.SourceGet(ctx, cmGVR, "root", "ns", "a"); err != nil {
		t.Fatal(err)
	}

	depStore, _ := c.Store(depGVR)
	dw := mustWatch(t, depStore, "east", WatchOptions{})
	setResources(cmList)
	waitFor(t, "deployments removed", func() bool { _, ok := c.Store(depGVR); return !ok })
	expectClosed(t, dw)
	setResources(cmList, appsList)
	waitFor(t, "deployments back", func() bool { _, ok := c.Store(depGVR); return ok })
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

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSourceResourceVersionBatching checks that concurrent callers share requests, and that a
// caller never gets the answer of a request that started before it called.
func TestSourceResourceVersionBatching(t *testing.T) {
	var calls atomic.Int64
	release := make(chan struct{})
	var current atomic.Uint64
	b := &rvBatcher{fetch: func(ctx context.Context) (uint64, error) {
		calls.Add(1)
		rv := current.Load() // the RV at the start of the request
		<-release
		return rv, nil
	}}
	current.Store(10)
	first := make(chan uint64)
	go func() { rv, _ := b.get(context.Background()); first <- rv }()
	waitFor(t, "first request", func() bool { return calls.Load() == 1 })
	// A write happens at 11 after the first request started; later callers must see >= 11.
	current.Store(11)
	var wg sync.WaitGroup
	results := make([]uint64, 20)
	for i := range results {
		wg.Add(1)
		go func(i int) { defer wg.Done(); results[i], _ = b.get(context.Background()) }(i)
	}
	time.Sleep(20 * time.Millisecond)
	release <- struct{}{} // first request ends
	if rv := <-first; rv != 10 {
		t.Fatalf("first got %d", rv)
	}
	release <- struct{}{} // the shared second request ends
	wg.Wait()
	for i, rv := range results {
		if rv != 11 {
			t.Fatalf("caller %d got %d, want 11", i, rv)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
	// A caller whose context ends stops waiting.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.get(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	close(release)
}
