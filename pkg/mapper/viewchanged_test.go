package mapper

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// TestViewChangedAtSameResourceVersion: an update of the view informer at an unchanged
// resourceVersion is skipped only when the object is unchanged too. A view re-rendered without a
// fresher source resourceVersion shows a changed object at the one it was last shown at
// (docs/views.md, "Customizations and resourceVersions"), here shown deleting once its namespace
// is no longer bound to the location: the mapper must sync it, or the copy and the location's
// finalizer stay until the object's next change.
func TestViewChangedAtSameResourceVersion(t *testing.T) {
	metrics := locationMetrics{location: "same-rv-west"}
	t.Cleanup(metrics.deleteGauges)
	m := &Mapper{cfg: Config{Location: "same-rv-west", ClusterName: DefaultClusterName}, states: newObjectStates(metrics),
		syncQueue: newQueue("test_sync", time.Millisecond, time.Second), statusQueue: newQueue("test_status", time.Millisecond, time.Second)}
	t.Cleanup(m.syncQueue.ShutDown)
	t.Cleanup(m.statusQueue.ShutDown)
	r := &resource{gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, namespaced: true}

	shown := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]interface{}{"k": "v"}}}
	shown.SetNamespace("tenant-a")
	shown.SetName("placed")
	shown.SetResourceVersion("292")
	shown.SetFinalizers([]string{contract.LocationFinalizer("same-rv-west")})

	m.viewChanged(r, shown, shown.DeepCopy())
	if n := m.syncQueue.Len(); n != 0 {
		t.Fatalf("a resync of an unchanged object queued %d syncs, want none", n)
	}

	deleting := shown.DeepCopy()
	deleting.SetDeletionTimestamp(&metav1.Time{Time: time.Unix(1_700_000_000, 0)})
	m.viewChanged(r, shown, deleting)
	if n := m.syncQueue.Len(); n != 1 {
		t.Fatalf("the object shown deleting at its unchanged resourceVersion 292 queued %d syncs, want 1", n)
	}
	key, _ := m.syncQueue.Get()
	if want := (itemKey{GVR: r.gvr, Cluster: DefaultClusterName, Namespace: "tenant-a", Name: "placed"}); key != want {
		t.Errorf("queued %v, want %v", key, want)
	}
	m.syncQueue.Done(key)

	newer := shown.DeepCopy()
	newer.SetResourceVersion("293")
	m.viewChanged(r, shown, newer)
	if n := m.syncQueue.Len(); n != 1 {
		t.Errorf("a new resourceVersion queued %d syncs, want 1", n)
	}
}
