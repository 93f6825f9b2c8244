package cache

import (
	"errors"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	discoveryfake "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cluster-mapper/cluster-mapper/pkg/source/sourcetest"
)

// TestReadinessCoversStartupResourcesOnly: HasSynced (readyz) waits for the
// resources of the first discovery, except one the source refuses to list (403), which is
// reported by its store instead; a resource discovered later that never syncs does not make
// the server unready. A resource whose source cannot be reached does block readiness.
func TestReadinessCoversStartupResourcesOnly(t *testing.T) {
	scheme := runtime.NewScheme()
	cmGVR := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	depGVR := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	widgetsGVR := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		cmGVR: "ConfigMapList", depGVR: "DeploymentList", widgetsGVR: "WidgetList",
		{Version: "v1", Resource: "pods"}: "PodList",
	}, cm("ns", "a", 5, locs("east")))
	var mu sync.Mutex
	podsErr := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	dyn.PrependReactor("list", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(depGVR.GroupResource(), "", errors.New("the server's RBAC does not cover deployments"))
	})
	dyn.PrependReactor("list", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(widgetsGVR.GroupResource(), "", errors.New("no"))
	})
	dyn.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if podsErr != nil {
			return true, nil, podsErr
		}
		return false, nil, nil
	})
	disc := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}
	var discMu sync.Mutex
	disc.Resources = []*metav1.APIResourceList{sourcetest.CoreV1, sourcetest.AppsV1}
	c, err := New(Config{Source: newSource(t, dyn, lockedDiscovery{disc, &discMu}), DiscoveryInterval: 20 * time.Millisecond, Store: StoreOptions{DefaultCluster: "root"}})
	if err != nil {
		t.Fatal(err)
	}
	runCache(t, c)

	// Pods cannot be reached: not ready, although deployments are only refused.
	waitFor(t, "deployments refused", func() bool {
		s, ok := c.Store(depGVR)
		return ok && apierrors.IsForbidden(s.SyncError())
	})
	waitFor(t, "configmaps synced", func() bool { s, ok := c.Store(cmGVR); return ok && s.HasSynced() })
	if c.HasSynced() {
		t.Fatalf("ready while pods could not be reached")
	}
	mu.Lock()
	podsErr = nil
	mu.Unlock()
	waitFor(t, "ready with deployments refused", c.HasSynced)
	if s, _ := c.Store(depGVR); s.HasSynced() {
		t.Fatalf("deployments synced although every list is refused")
	}

	// A resource discovered later that never syncs leaves the server ready.
	discMu.Lock()
	disc.Resources = []*metav1.APIResourceList{sourcetest.CoreV1, sourcetest.AppsV1, sourcetest.WidgetsV1}
	discMu.Unlock()
	waitFor(t, "widgets mirrored", func() bool { _, ok := c.Store(widgetsGVR); return ok })
	if !c.HasSynced() {
		t.Fatalf("a resource discovered later made the server unready")
	}
}

// TestSourceBackoffBound checks the retry pacing of a failing source: no retry of a failed list
// or watch of the source waits more than 1.5 s (client-go's default waits up to 60 s).
func TestSourceBackoffBound(t *testing.T) {
	delay := sourceBackoff.DelayFunc()
	for i := 0; i < 200; i++ {
		if d := delay(); d > 1500*time.Millisecond || d <= 0 {
			t.Fatalf("retry %d waits %v", i, d)
		}
	}
}
