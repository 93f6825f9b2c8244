package dependencies

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestPlacementRead: a Placement's update queues a round of its namespace only when it
// changes what a round reads: its spec (generation), its deletion, its annotations, or the
// two status fields this controller writes; the placement controller's own status writes
// (counts, conditions) do not.
func TestPlacementRead(t *testing.T) {
	base := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "control.mapper.kcp.io/v1alpha1", "kind": "Placement",
			"metadata": map[string]interface{}{"name": "p", "namespace": "ns", "generation": int64(1)},
			"spec":     map[string]interface{}{"numberOfLocations": int64(1)},
			"status":   map[string]interface{}{"placedObjects": int64(3), "missingDependencies": int64(1)},
		}}
		return u
	}
	for _, tc := range []struct {
		name   string
		change func(u *unstructured.Unstructured)
		queues bool
	}{
		{"the placement controller's counts", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(4), "status", "placedObjects")
		}, false},
		{"the placement controller's conditions", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []interface{}{map[string]interface{}{"type": "Ready", "status": "True"}}, "status", "conditions")
		}, false},
		{"the spec (generation)", func(u *unstructured.Unstructured) { u.SetGeneration(2) }, true},
		{"deletion", func(u *unstructured.Unstructured) { now := metav1.Now(); u.SetDeletionTimestamp(&now) }, true},
		{"annotations", func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"kcp.io/cluster": "c"}) }, true},
		{"status.missingDependencies", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(0), "status", "missingDependencies")
		}, true},
		{"status.unmirroredDependencies", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedStringSlice(u.Object, []string{"secrets"}, "status", "unmirroredDependencies")
		}, true},
	} {
		old, changed := base(), base()
		tc.change(changed)
		if got := placementRead(old) != placementRead(changed); got != tc.queues {
			t.Errorf("%s: queues a round %v, want %v", tc.name, got, tc.queues)
		}
	}
}
