package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationevents"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// deletionNamespace holds the objects of the deletion protocol's tests.
const deletionNamespace = "deletion"

// await polls cond every 200ms until it reports true, and fails the test with what after
// timeout (the conditions read the clusters: the work they wait for is observable there).
func await(t *testing.T, ctx context.Context, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// sourceObject returns the source object ns/name of gvr, nil when it is gone.
func (e *mapperEnv) sourceObject(t *testing.T, ctx context.Context, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := e.src.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("reading the source object %s/%s: %v", ns, name, err)
	}
	return u
}

// locationFinalizers returns the locations whose finalizer u carries, sorted.
func locationFinalizers(u *unstructured.Unstructured) []string {
	var out []string
	for _, f := range u.GetFinalizers() {
		if loc, ok := contract.FinalizerLocation(f); ok {
			out = append(out, loc)
		}
	}
	slices.Sort(out)
	return out
}

// awaitFinalizers waits until the source object carries exactly the finalizers of locations.
func (e *mapperEnv) awaitFinalizers(t *testing.T, ctx context.Context, gvr schema.GroupVersionResource, name string, locations ...string) *unstructured.Unstructured {
	t.Helper()
	var u *unstructured.Unstructured
	await(t, ctx, time.Minute, name+"'s location finalizers to be ["+strings.Join(locations, ",")+"]", func(ctx context.Context) (bool, error) {
		u = e.sourceObject(t, ctx, gvr, deletionNamespace, name)
		return u != nil && slices.Equal(locationFinalizers(u), locations), nil
	})
	return u
}

// awaitCopy waits until location's target holds the copy of name (present) or holds none.
func (e *mapperEnv) awaitCopy(t *testing.T, ctx context.Context, location string, gvr schema.GroupVersionResource, name string, present bool) *unstructured.Unstructured {
	t.Helper()
	var u *unstructured.Unstructured
	what := location + "'s copy of " + name + " to be gone"
	if present {
		what = location + "'s copy of " + name
	}
	await(t, ctx, time.Minute, what, func(ctx context.Context) (bool, error) {
		u = e.targetObject(t, ctx, location, gvr, deletionNamespace, name)
		return (u != nil) == present, nil
	})
	return u
}

// awaitSourceGone waits until the source object name is gone.
func (e *mapperEnv) awaitSourceGone(t *testing.T, ctx context.Context, gvr schema.GroupVersionResource, name string) {
	t.Helper()
	await(t, ctx, time.Minute, "the source object "+name+" to be gone", func(ctx context.Context) (bool, error) {
		return e.sourceObject(t, ctx, gvr, deletionNamespace, name) == nil, nil
	})
}

// deleteSource deletes the source object name.
func (e *mapperEnv) deleteSource(t *testing.T, ctx context.Context, gvr schema.GroupVersionResource, name string) {
	t.Helper()
	if err := e.src.Resource(gvr).Namespace(deletionNamespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting %s at the source: %v", name, err)
	}
}

// patchFinalizers sets the finalizers of an object with a merge patch (of the source or a
// target).
func patchFinalizers(t *testing.T, ctx context.Context, c interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, options metav1.PatchOptions, subresources ...string) (*unstructured.Unstructured, error)
}, name string, finalizers ...string) {
	t.Helper()
	list := `null`
	if len(finalizers) > 0 {
		list = `["` + finalizers[0] + `"`
		for _, f := range finalizers[1:] {
			list += `,"` + f + `"`
		}
		list += `]`
	}
	if _, err := c.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":`+list+`}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("setting the finalizers of %s: %v", name, err)
	}
}

// TestDeletionProtocol runs the deletion protocol (docs/mapper.md, "Deletion") with two
// targets, east and west, each with its mapper:
//   - a Deployment deleted at the source while east's target kube-apiserver is down: west's copy
//     goes and west's finalizer is removed within seconds; the source object stays Terminating
//     with east's finalizer, an Event on it names east (none west), the pending deletion is
//     counted (metric, `locations`); once east's target is back, its copy goes, its finalizer is
//     removed and the source object is gone;
//   - a target copy holding a finalizer of its own keeps the source object Terminating until
//     that finalizer is removed on the target;
//   - an object unassigned from east, whose copy is held on the target, and then deleted at the
//     source: east's watch shows the source's deletionTimestamp instead of the
//     creationTimestamp, and east releases the object once its copy is gone;
//   - unassigning east only deletes east's copy and removes east's finalizer; the object stays
//     on west;
//   - kcp.io/deletion-policy: Orphan leaves the copies, unmarked, and the source object goes;
//   - a source object held by another controller's finalizer keeps its copies until that
//     finalizer is removed;
//   - deleting east's SyncTarget while east's target is down releases the objects waiting for
//     east (mapper-controller removes its finalizers).
func TestDeletionProtocol(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := startMapperEnv(t, ctx, "east", "west")
	ensureNamespace(t, ctx, env.src, deletionNamespace)
	mapperEast := env.startMapper(t, "mapper-east", "east", nil)
	env.startMapper(t, "mapper-west", "west", nil)
	src := env.src.Resource(configMapsGVR).Namespace(deletionNamespace)
	create := func(gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
		t.Helper()
		if _, err := env.src.Resource(gvr).Namespace(deletionNamespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("delete while a target is down", func(t *testing.T) {
		create(deploymentsGVR, newDeployment(deletionNamespace, "web", "east", "west"))
		env.awaitCopy(t, ctx, "east", deploymentsGVR, "web", true)
		env.awaitCopy(t, ctx, "west", deploymentsGVR, "web", true)
		env.awaitFinalizers(t, ctx, deploymentsGVR, "web", "east", "west")
		env.targets["east"].KillAPIServer(t)
		env.deleteSource(t, ctx, deploymentsGVR, "web")
		start := time.Now()
		env.awaitCopy(t, ctx, "west", deploymentsGVR, "web", false)
		u := env.awaitFinalizers(t, ctx, deploymentsGVR, "web", "east")
		t.Logf("west's copy gone and its finalizer removed %v after the deletion", time.Since(start).Round(time.Millisecond))
		if time.Since(start) > 15*time.Second {
			t.Errorf("west took %v to release the object; want seconds", time.Since(start))
		}
		if u.GetDeletionTimestamp() == nil {
			t.Fatalf("the source object is not Terminating: %v", u.Object["metadata"])
		}
		// Visible progress: an Event on the object names east (and none west, which released
		// it within the delay), the metric and `locations` count the pending deletion.
		pending := cache.PendingDeletion{Name: "web", UID: u.GetUID(), Location: "east"}
		events := env.src.Resource(schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}).Namespace(deletionNamespace)
		await(t, ctx, time.Minute, "an Event naming east on the object", func(ctx context.Context) (bool, error) {
			e, err := events.Get(ctx, locationevents.EventName(pending), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			note, _, _ := unstructured.NestedString(e.Object, "note")
			uid, _, _ := unstructured.NestedString(e.Object, "regarding", "uid")
			return strings.Contains(note, "location east") && uid == string(u.GetUID()), nil
		})
		pending.Location = "west"
		if _, err := events.Get(ctx, locationevents.EventName(pending), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("an Event names west, which released the object at once: %v", err)
		}
		if v := env.server.Metric(t, env.source.Admin(), "mapper_apiserver_location_pending_deletions", `location="east"`); v != 1 {
			t.Errorf("mapper_apiserver_location_pending_deletions{location=\"east\"} = %v, want 1", v)
		}
		locations, err := dynamic.NewForConfig(env.server.Config(env.source.Admin()))
		if err != nil {
			t.Fatal(err)
		}
		east, err := locations.Resource(schema.GroupVersionResource{Group: "mapper.kcp.io", Version: "v1alpha1", Resource: "locations"}).Get(ctx, "east", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n, _, _ := unstructured.NestedInt64(east.Object, "status", "deleting"); n != 1 {
			t.Errorf("location east's status.deleting = %d, want 1", n)
		}
		cameBack := env.targets["east"].StartAPIServerAgain(env.owner) // outlives the subtest
		mapperEast.afterTargetOutage(t, ctx, env.targets["east"], cameBack)
		env.awaitSourceGone(t, ctx, deploymentsGVR, "web")
		env.awaitCopy(t, ctx, "east", deploymentsGVR, "web", false)
	})

	t.Run("a target copy held by its own finalizer", func(t *testing.T) {
		create(configMapsGVR, newConfigMap(deletionNamespace, "held", "east"))
		env.awaitCopy(t, ctx, "east", configMapsGVR, "held", true)
		env.awaitFinalizers(t, ctx, configMapsGVR, "held", "east")
		tgt := env.tgt["east"].Resource(configMapsGVR).Namespace(deletionNamespace)
		patchFinalizers(t, ctx, tgt, "held", "example.com/target-cleanup")
		env.deleteSource(t, ctx, configMapsGVR, "held")
		await(t, ctx, time.Minute, "the mapper to delete east's copy", func(ctx context.Context) (bool, error) {
			c := env.targetObject(t, ctx, "east", configMapsGVR, deletionNamespace, "held")
			return c != nil && c.GetDeletionTimestamp() != nil, nil
		})
		// The copy is Terminating on the target: the source object waits for it.
		if u := env.sourceObject(t, ctx, configMapsGVR, deletionNamespace, "held"); u == nil || !slices.Equal(locationFinalizers(u), []string{"east"}) {
			t.Fatalf("the source object was released while east's copy is still on the target: %v", u)
		}
		patchFinalizers(t, ctx, tgt, "held")
		env.awaitSourceGone(t, ctx, configMapsGVR, "held")
	})

	t.Run("unassigned, then deleted while the copy is held", func(t *testing.T) {
		// East's view shows an object unassigned from it with its creationTimestamp as
		// deletionTimestamp; deleted at the source meanwhile, it shows the source's, and east's
		// watch gets that change: the finalizer removal east's mapper makes from its informer's
		// object must be the view's current state (docs/views.md, "Deletion").
		create(configMapsGVR, newConfigMap(deletionNamespace, "left", "east"))
		env.awaitCopy(t, ctx, "east", configMapsGVR, "left", true)
		env.awaitFinalizers(t, ctx, configMapsGVR, "left", "east")
		tgt := env.tgt["east"].Resource(configMapsGVR).Namespace(deletionNamespace)
		patchFinalizers(t, ctx, tgt, "left", "example.com/target-cleanup")
		env.mutate(t, ctx, configMapsGVR, deletionNamespace, "left", func(u *unstructured.Unstructured) { setAssignment(u) })
		await(t, ctx, time.Minute, "the mapper to delete east's copy", func(ctx context.Context) (bool, error) {
			c := env.targetObject(t, ctx, "east", configMapsGVR, deletionNamespace, "left")
			return c != nil && c.GetDeletionTimestamp() != nil, nil
		})
		view, err := dynamic.NewForConfig(env.server.ViewConfig(env.source.Admin(), "east"))
		if err != nil {
			t.Fatal(err)
		}
		viewed, err := view.Resource(configMapsGVR).Namespace(deletionNamespace).Get(ctx, "left", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if dt := viewed.GetDeletionTimestamp(); dt == nil || !dt.Equal(ptrTo(viewed.GetCreationTimestamp())) {
			t.Fatalf("east's view of the unassigned object shows deletionTimestamp %v, want its creationTimestamp %v", dt, viewed.GetCreationTimestamp())
		}
		w, err := view.Resource(configMapsGVR).Namespace(deletionNamespace).Watch(ctx, metav1.ListOptions{ResourceVersion: viewed.GetResourceVersion()})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		// The view shows times in seconds: deleted within the second of its creation, the
		// object's view would not change (its creationTimestamp is then the source's
		// deletionTimestamp), and rightly no event would come. Delete it in a later second.
		time.Sleep(time.Until(viewed.GetCreationTimestamp().Add(1100 * time.Millisecond)))
		env.deleteSource(t, ctx, configMapsGVR, "left")
		deleting := env.sourceObject(t, ctx, configMapsGVR, deletionNamespace, "left")
		if deleting == nil || deleting.GetDeletionTimestamp() == nil {
			t.Fatalf("the source object is not Terminating while east's finalizer holds it: %v", deleting)
		}
		if deleting.GetDeletionTimestamp().Equal(ptrTo(viewed.GetCreationTimestamp())) {
			t.Fatalf("the source's deletionTimestamp %v is the creationTimestamp: the view cannot show the change", deleting.GetDeletionTimestamp())
		}
		timeout := time.After(30 * time.Second)
		for shown := false; !shown; {
			select {
			case e, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("east's watch ended before it showed the source's deletion")
				}
				u, isObject := e.Object.(*unstructured.Unstructured)
				if e.Type != watch.Modified || !isObject || u.GetName() != "left" {
					continue
				}
				shown = u.GetDeletionTimestamp() != nil && u.GetDeletionTimestamp().Equal(deleting.GetDeletionTimestamp())
			case <-timeout:
				t.Fatalf("east's watch got no event showing the source's deletionTimestamp %v (the view shows the creationTimestamp until then)", deleting.GetDeletionTimestamp())
			}
		}
		patchFinalizers(t, ctx, tgt, "left")
		env.awaitSourceGone(t, ctx, configMapsGVR, "left")
	})

	t.Run("unassign one location", func(t *testing.T) {
		create(configMapsGVR, newConfigMap(deletionNamespace, "moved", "east", "west"))
		env.awaitCopy(t, ctx, "east", configMapsGVR, "moved", true)
		west := env.awaitCopy(t, ctx, "west", configMapsGVR, "moved", true)
		env.awaitFinalizers(t, ctx, configMapsGVR, "moved", "east", "west")
		env.mutate(t, ctx, configMapsGVR, deletionNamespace, "moved", func(u *unstructured.Unstructured) {
			ann := u.GetAnnotations()
			ann[contract.AssignedLocationsAnnotation] = `["west"]`
			u.SetAnnotations(ann)
		})
		env.awaitCopy(t, ctx, "east", configMapsGVR, "moved", false)
		u := env.awaitFinalizers(t, ctx, configMapsGVR, "moved", "west")
		if u.GetDeletionTimestamp() != nil {
			t.Fatal("the source object is deleting")
		}
		if now := env.targetObject(t, ctx, "west", configMapsGVR, deletionNamespace, "moved"); now == nil || now.GetUID() != west.GetUID() {
			t.Fatalf("west's copy was replaced or deleted: %v", now)
		}
	})

	t.Run("orphan", func(t *testing.T) {
		cm := newConfigMap(deletionNamespace, "orphaned", "east", "west")
		ann := cm.GetAnnotations()
		ann[contract.DeletionPolicyAnnotation] = contract.DeletionPolicyOrphan
		cm.SetAnnotations(ann)
		create(configMapsGVR, cm)
		copies := map[string]types.UID{}
		for _, l := range []string{"east", "west"} {
			copies[l] = env.awaitCopy(t, ctx, l, configMapsGVR, "orphaned", true).GetUID()
		}
		env.awaitFinalizers(t, ctx, configMapsGVR, "orphaned", "east", "west")
		env.deleteSource(t, ctx, configMapsGVR, "orphaned")
		env.awaitSourceGone(t, ctx, configMapsGVR, "orphaned")
		for l, uid := range copies {
			c := env.targetObject(t, ctx, l, configMapsGVR, deletionNamespace, "orphaned")
			if c == nil || c.GetUID() != uid {
				t.Fatalf("%s's orphaned copy is gone: %v", l, c)
			}
			if _, marked := c.GetLabels()[contract.LocationLabel]; marked || c.GetAnnotations()[contract.SourceNameAnnotation] != "" {
				t.Fatalf("%s's orphaned copy keeps the mapper's marks: %v %v", l, c.GetLabels(), c.GetAnnotations())
			}
		}
	})

	t.Run("another controller's finalizer first", func(t *testing.T) {
		cm := newConfigMap(deletionNamespace, "first", "east")
		cm.SetFinalizers([]string{"example.com/first"})
		create(configMapsGVR, cm)
		uid := env.awaitCopy(t, ctx, "east", configMapsGVR, "first", true).GetUID()
		env.awaitFinalizers(t, ctx, configMapsGVR, "first", "east")
		env.deleteSource(t, ctx, configMapsGVR, "first")
		// A barrier: an object created after the deletion is mapped, so east's mapper has seen
		// the deletion; the copy of the held object stays.
		create(configMapsGVR, newConfigMap(deletionNamespace, "barrier", "east"))
		env.awaitCopy(t, ctx, "east", configMapsGVR, "barrier", true)
		if c := env.targetObject(t, ctx, "east", configMapsGVR, deletionNamespace, "first"); c == nil || c.GetUID() != uid || c.GetDeletionTimestamp() != nil {
			t.Fatalf("east's copy was deleted while another controller's finalizer holds the source object: %v", c)
		}
		patchFinalizers(t, ctx, src, "first", contract.LocationFinalizer("east"))
		env.awaitCopy(t, ctx, "east", configMapsGVR, "first", false)
		env.awaitSourceGone(t, ctx, configMapsGVR, "first")
	})

	t.Run("one add and one remove per object and location", func(t *testing.T) {
		// The ConfigMaps so far: held (east), left (east), moved (east, west; east released),
		// orphaned (east, west), first (east) and barrier (east) got 8 finalizers; held, left,
		// moved's east, orphaned's two and first's were removed: 6. Each successful write
		// through a view is one update of the source (marksStorage).
		for change, want := range map[string]float64{"add": 8, "remove": 6} {
			got := env.server.Metric(t, env.source.Admin(), "mapper_apiserver_view_finalizer_writes_total", `change="`+change+`",code="200",resource="configmaps"`)
			if got != want {
				t.Errorf("finalizer writes %s of configmaps: %v, want %v", change, got, want)
			}
		}
	})

	t.Run("a retired location releases its objects", func(t *testing.T) {
		framework.InstallControlCRDs(t, ctx, env.source)
		syncTargets := env.src.Resource(schema.GroupVersionResource{Group: "control.mapper.kcp.io", Version: "v1alpha1", Resource: "synctargets"})
		if _, err := syncTargets.Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "control.mapper.kcp.io/v1alpha1", "kind": "SyncTarget", "metadata": map[string]interface{}{"name": "east"},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.StartMapperController(t, ctx, env.source, time.Minute)
		create(configMapsGVR, newConfigMap(deletionNamespace, "retired", "east", "west"))
		env.awaitCopy(t, ctx, "east", configMapsGVR, "retired", true)
		env.awaitFinalizers(t, ctx, configMapsGVR, "retired", "east", "west")
		env.targets["east"].KillAPIServer(t)
		env.deleteSource(t, ctx, configMapsGVR, "retired")
		env.awaitFinalizers(t, ctx, configMapsGVR, "retired", "east")
		if err := syncTargets.Delete(ctx, "east", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		env.awaitSourceGone(t, ctx, configMapsGVR, "retired")
	})

}
