package cache

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	discoveryfake "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/pkg/source/sourcetest"
)

// TestSetRulesReadsTheSourceConcurrentlyWithoutTheLock: Cache.SetRules reads the source's
// resourceVersion of every store before re-rendering it. With the source slow to answer those
// reads, the reads of all stores are in flight at once (not one store after the other, each
// waiting up to rulesProbeTimeout), and a second SetRules is not held up behind the first's
// reads; once the source answers, every store renders with the newer rules.
func TestSetRulesReadsTheSourceConcurrentlyWithoutTheLock(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		{Version: "v1", Resource: "configmaps"}:                 "ConfigMapList",
		{Version: "v1", Resource: "pods"}:                       "PodList",
		{Group: "apps", Version: "v1", Resource: "deployments"}: "DeploymentList",
	})
	// Once armed (after the reflectors' first LISTs), the source's answers to LISTs (the
	// resourceVersion reads) wait for release.
	slow := &slowLists{Interface: dyn, release: make(chan struct{})}
	disc := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}
	disc.Resources = []*metav1.APIResourceList{sourcetest.CoreV1, sourcetest.AppsV1}
	c, err := New(Config{Source: newSource(t, slow, disc), DiscoveryInterval: time.Hour, Store: StoreOptions{DefaultCluster: "root"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); c.Run(ctx) }()
	defer func() { cancel(); <-runDone }()
	waitFor(t, "cache synced", c.HasSynced)
	stores := len(c.Resources())
	if stores != 3 {
		t.Fatalf("%d resources mirrored, want 3", stores)
	}

	slow.armed.Store(true)
	older, _ := customization.NewSnapshot(1, nil, nil)
	newer, _ := customization.NewSnapshot(2, nil, nil)
	var calls sync.WaitGroup
	calls.Add(2)
	go func() { defer calls.Done(); c.SetRules(older) }()
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return int(slow.inFlight.Load()) == stores, nil
	}); err != nil {
		t.Fatalf("%d of the %d resourceVersion reads are in flight at once, want all", slow.inFlight.Load(), stores)
	}
	go func() { defer calls.Done(); c.SetRules(newer) }()
	// The second call takes effect for stores created from now on while the first one's
	// reads are still waiting.
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return c.rules.load() == Rules(newer), nil
	}); err != nil {
		t.Fatalf("a second SetRules waits for the first one's reads of the source")
	}
	close(slow.release)
	calls.Wait()
	for _, info := range c.Resources() {
		s, _ := c.Store(info.GVR)
		if s.Rules() != Rules(newer) {
			t.Errorf("%s renders with the rules at resourceVersion %d, want the newer ones", info.GVR.GroupResource(), s.Rules().ResourceVersion())
		}
	}
}

// slowLists is a dynamic client whose LISTs, once armed, wait until release is closed (client-go's
// fake runs its reactors under one lock, so a reactor cannot hold several LISTs at once).
type slowLists struct {
	dynamic.Interface
	armed    atomic.Bool
	inFlight atomic.Int32
	release  chan struct{}
}

// IsWatchListSemanticsUnSupported keeps the fake's answer: its watches do not stream lists.
func (s *slowLists) IsWatchListSemanticsUnSupported() bool { return true }

func (s *slowLists) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return slowResource{NamespaceableResourceInterface: s.Interface.Resource(gvr), s: s}
}

type slowResource struct {
	dynamic.NamespaceableResourceInterface
	s *slowLists
}

func (r slowResource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	if r.s.armed.Load() {
		r.s.inFlight.Add(1)
		defer r.s.inFlight.Add(-1)
		<-r.s.release
	}
	return r.NamespaceableResourceInterface.List(ctx, opts)
}
