package placement

import (
	"context"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/informers"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
)

// TestLocationsKeptUntilPlacementInputChanges checks that Locations.List converts the SyncTargets
// again only after an event that changes what placement reads: a status write that only
// changes object counts (what every heartbeat writes each minute) keeps the slice, a label
// change replaces it. The informers run over a fake dynamic client: this is the cache's
// invalidation logic, TestPlacement (test/e2e) proves placement against kube-apiserver.
func TestLocationsKeptUntilPlacementInputChanges(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		synctarget.Resource: "SyncTargetList", Resource: "PlacementList",
	})
	set := informers.NewSet(dyn, nil, nil)
	c := New(Config{Dynamic: dyn, Informers: set})
	set.Start(ctx)
	defer set.Shutdown()
	defer cancel() // before Shutdown, which waits for the informers to stop

	st := &controlv1alpha1.SyncTarget{TypeMeta: metav1.TypeMeta{APIVersion: controlv1alpha1.SchemeGroupVersion.String(), Kind: "SyncTarget"},
		ObjectMeta: metav1.ObjectMeta{Name: "north", ResourceVersion: "1", Labels: map[string]string{"region": "eu"}}}
	rv := 1
	write := func(mutate func(*controlv1alpha1.SyncTarget)) {
		t.Helper()
		mutate(st)
		// kube-apiserver moves the resourceVersion on every write; the fake client does not.
		rv++
		st.ResourceVersion = strconv.Itoa(rv)
		u, err := synctarget.ToUnstructured(st)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(synctarget.Resource).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	u, err := synctarget.ToUnstructured(st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(synctarget.Resource).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// waitStored waits until the informer's store holds a SyncTarget for which ok holds.
	waitStored := func(what string, ok func(*controlv1alpha1.SyncTarget) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			obj, found, _ := c.targets.GetStore().GetByKey("north")
			if !found {
				return false, nil
			}
			got, err := synctarget.FromUnstructured(obj.(*unstructured.Unstructured))
			return err == nil && ok(got), nil
		})
		if err != nil {
			t.Fatalf("the informer never stored %s: %v", what, err)
		}
	}
	// changes is the count of events that changed what placement reads.
	changes := func() uint64 {
		c.locations.mu.Lock()
		defer c.locations.mu.Unlock()
		return c.locations.changes
	}
	waitStored("the SyncTarget", func(*controlv1alpha1.SyncTarget) bool { return true })
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return changes() > 0, nil
	}); err != nil {
		t.Fatal("the SyncTarget's add event never reached the handler")
	}
	first := c.locations.List()
	if len(first) != 1 || first[0].Labels["region"] != "eu" {
		t.Fatalf("locations: %+v", first)
	}

	write(func(st *controlv1alpha1.SyncTarget) { st.Status.Objects = &controlv1alpha1.ObjectCounts{Assigned: 7} })
	waitStored("the object counts", func(got *controlv1alpha1.SyncTarget) bool { return got.Status.Objects != nil })
	if again := c.locations.List(); len(again) != 1 || &again[0] != &first[0] {
		t.Errorf("a status write of object counts converted the locations again")
	}

	at := changes()
	write(func(st *controlv1alpha1.SyncTarget) { st.Labels["region"] = "us" })
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return changes() > at, nil
	}); err != nil {
		t.Fatal("the label change never reached the handler")
	}
	if got := c.locations.List(); len(got) != 1 || got[0].Labels["region"] != "us" {
		t.Errorf("after a label change, locations: %+v", got)
	}
}
