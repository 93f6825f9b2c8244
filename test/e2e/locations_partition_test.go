package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// partitionOutage is how long the target stays unreachable in TestLocationPartition:
// a target kube-apiserver is stopped for 2 minutes while the source changes.
const partitionOutage = 2 * time.Minute

// TestLocationPartition is the partition test, with intermittent connectivity:
// the target kube-apiserver of a pull mapper is killed and kept down for two minutes while
// the source deletes, changes, creates and re-assigns objects. Meanwhile the mapper reports
// Ready=False (TargetUnreachable) and the location's view keeps serving the new state. When
// the target is back, the mapper catches up to 0 violations without deleting and re-creating
// anything: every object that stayed assigned keeps its target UID, changed ones included.
// The objects that left the location meanwhile (deleted or re-assigned) are held by its
// finalizer: its view shows them deleting and the deleted ones stay Terminating at the source
// until the mapper is back, deletes its copies and releases them (docs/mapper.md, "Deletion").
// The mapper loses its leader-election Lease (held in the target) during the partition and
// exits; the test restarts it as its Deployment would.
func TestLocationPartition(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	env := startLocationsEnv(t, ctx, "east")
	const ns, objects = "apps", 20
	ensureNamespace(t, ctx, env.src, ns)
	name := func(i int) string { return fmt.Sprintf("cm-%02d", i) }
	for i := 0; i < objects; i++ {
		if _, err := env.src.Resource(configMapsGVR).Namespace(ns).Create(ctx, newConfigMap(ns, name(i), "east"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	east := env.startMapper(t, "mapper-east", "east", nil, locationMapperArgs...)
	waitSyncTarget(t, ctx, env.dyn, "east", 3*time.Minute, "Ready=True with 20 objects in sync", func(st *controlv1alpha1.SyncTarget) bool {
		o := st.Status.Objects
		return readyIs(metav1.ConditionTrue, controlv1alpha1.ReasonMapperReady)(st) && o != nil && o.InSync == objects && o.InViolation == 0
	})
	env.converge(t, ctx, "initial sync", "east")
	uids := map[string]types.UID{}
	for i := 0; i < objects; i++ {
		uids[name(i)] = env.targetObject(t, ctx, "east", configMapsGVR, ns, name(i)).GetUID()
	}

	target := env.targets["east"]
	target.KillAPIServer(t)
	down := time.Now()
	t.Logf("target kube-apiserver of east killed; down for %v", partitionOutage)
	waitSyncTarget(t, ctx, env.dyn, "east", time.Minute, "Ready=False (TargetUnreachable)", readyIs(metav1.ConditionFalse, controlv1alpha1.ReasonTargetUnreachable))

	// The source changes during the partition: 5 deletes, 5 updates, 5 creates, 2 objects
	// re-assigned elsewhere.
	for i := 0; i < 5; i++ {
		if err := env.src.Resource(configMapsGVR).Namespace(ns).Delete(ctx, name(i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 5; i < 10; i++ {
		env.mutate(t, ctx, configMapsGVR, ns, name(i), func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "changed during the partition", "data", "key")
		})
	}
	for i := objects; i < objects+5; i++ {
		if _, err := env.src.Resource(configMapsGVR).Namespace(ns).Create(ctx, newConfigMap(ns, name(i), "east"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 10; i < 12; i++ {
		env.mutate(t, ctx, configMapsGVR, ns, name(i), func(u *unstructured.Unstructured) { setAssignment(u, "west") })
	}
	const want = objects - 5 + 5 - 2

	// The NotReady location's view keeps serving, with the new state. east's mapper holds every
	// object it copied with its finalizer, so the 5 objects deleted at the source and the 2
	// re-assigned to west stay in east's view, shown deleting, until east's copies are gone
	// (docs/views.md and docs/mapper.md, "Deletion"): a location that is offline keeps its
	// finalizer, and nobody at the source loses sight of the copies still to be deleted.
	view, err := dynamic.NewForConfig(env.api.ViewConfig(env.source.Admin(), "east"))
	if err != nil {
		t.Fatal(err)
	}
	wantDeleting := sets.New(name(0), name(1), name(2), name(3), name(4), name(10), name(11))
	viewState := func() (live int, deleting sets.Set[string], err error) {
		list, err := view.Resource(configMapsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, nil, err
		}
		deleting = sets.New[string]()
		for _, o := range list.Items {
			if o.GetDeletionTimestamp() != nil {
				deleting.Insert(o.GetName())
			} else {
				live++
			}
		}
		return live, deleting, nil
	}
	mapperEventually(t, ctx, 30*time.Second, "the view of the partitioned location shows the source's changes", func() (bool, string) {
		live, deleting, err := viewState()
		if err != nil {
			return false, err.Error()
		}
		return live == want && deleting.Equal(wantDeleting), fmt.Sprintf("%d objects not deleting, want %d; deleting %v, want %v", live, want, sets.List(deleting), sets.List(wantDeleting))
	})
	// The source keeps the deleted objects, Terminating, for east's finalizer.
	for i := 0; i < 5; i++ {
		obj := env.sourceObject(t, ctx, configMapsGVR, ns, name(i))
		if obj == nil || obj.GetDeletionTimestamp() == nil || !slices.Equal(locationFinalizers(obj), []string{"east"}) {
			t.Errorf("%s deleted at the source while east is down: want it Terminating with east's finalizer, got %v", name(i), obj)
		}
	}

	select {
	case <-time.After(time.Until(down.Add(partitionOutage))):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	target.StartAPIServerAgain(t)
	t.Logf("target kube-apiserver of east back after %v", time.Since(down).Round(time.Second))
	// The mapper's leader-election Lease lives in its target, so the partition cost it the
	// lease and it exited ("lost the leader lease"), as Kubernetes controllers do; its
	// Deployment's restart policy brings it back. Do what the kubelet would.
	if !east.proc.Running() {
		t.Logf("the mapper exited during the partition (%v); restarting it as its Deployment would", east.proc.ExitError())
		east.restart()
	}
	waitSyncTarget(t, ctx, env.dyn, "east", 2*time.Minute, "Ready=True after the partition", readyIs(metav1.ConditionTrue, controlv1alpha1.ReasonMapperReady))
	env.converge(t, ctx, "after the partition", "east")

	// East's mapper deleted its copies of the 7 objects that left it and released them: the
	// deleted ones are gone from the source, and east's view holds only the 18 it is assigned.
	mapperEventually(t, ctx, time.Minute, "east releases the objects that left it", func() (bool, string) {
		live, deleting, err := viewState()
		if err != nil {
			return false, err.Error()
		}
		return live == want && deleting.Len() == 0, fmt.Sprintf("%d objects not deleting, want %d; deleting %v, want none", live, want, sets.List(deleting))
	})
	for n := range wantDeleting {
		if obj := env.targetObject(t, ctx, "east", configMapsGVR, ns, n); obj != nil {
			t.Errorf("%s left east during the partition, but its copy is still on east's target", n)
		}
	}
	for i := 0; i < 5; i++ {
		if obj := env.sourceObject(t, ctx, configMapsGVR, ns, name(i)); obj != nil {
			t.Errorf("%s is still in the source after east released it: finalizers %v", name(i), obj.GetFinalizers())
		}
	}
	for i := 10; i < 12; i++ {
		if obj := env.sourceObject(t, ctx, configMapsGVR, ns, name(i)); obj == nil || len(locationFinalizers(obj)) != 0 {
			t.Errorf("%s, re-assigned to west (which has no mapper), should carry no location finalizer: %v", name(i), obj)
		}
	}

	for i := 5; i < objects; i++ {
		if i == 10 || i == 11 {
			continue
		}
		obj := env.targetObject(t, ctx, "east", configMapsGVR, ns, name(i))
		if obj == nil {
			t.Fatalf("%s is missing on the target after the partition", name(i))
		}
		if obj.GetUID() != uids[name(i)] {
			t.Errorf("%s was deleted and re-created on the target: UID %s, before the partition %s", name(i), obj.GetUID(), uids[name(i)])
		}
		if i < 10 {
			if v, _, _ := unstructured.NestedString(obj.Object, "data", "key"); v != "changed during the partition" {
				t.Errorf("%s on the target has data.key %q, want the change made during the partition", name(i), v)
			}
		}
	}
}
