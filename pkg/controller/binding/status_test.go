package binding

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
)

// TestStatusOf: a valid binding reports the locations it binds (the first 100, and their
// number) and Ready=True Bound; an invalid one Ready=False InvalidSpec and no locations.
func TestStatusOf(t *testing.T) {
	var locs []locationbinding.Location
	for i := range 150 {
		locs = append(locs, locationbinding.Location{Name: fmt.Sprintf("loc-%03d", i), Labels: map[string]string{"tier": fmt.Sprint(i % 2)}})
	}
	good := &controlv1alpha1.LocationBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "all", Generation: 3},
		Spec: controlv1alpha1.LocationBindingSpec{LocationSelector: &metav1.LabelSelector{}}}
	bad := &controlv1alpha1.LocationBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "bad", Generation: 1},
		Spec: controlv1alpha1.LocationBindingSpec{LocationSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}}}
	key := func(b *controlv1alpha1.LocationBinding) locationbinding.Key {
		return locationbinding.Key{Namespace: b.Namespace, Name: b.Name}
	}
	x := locationbinding.NewIndex([]*locationbinding.Binding{locationbinding.Compile(key(good), &good.Spec), locationbinding.Compile(key(bad), &bad.Spec)}, locs)

	st := statusOf(good, x.Binding(key(good)), x)
	ready := meta.FindStatusCondition(st.Conditions, controlv1alpha1.LocationBindingReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.Reason != controlv1alpha1.ReasonBound || st.ObservedGeneration != 3 {
		t.Errorf("status of a valid binding: %+v", st)
	}
	if st.BoundLocations != 150 || len(st.Locations) != 100 || st.Locations[0] != "loc-000" || st.Locations[99] != "loc-099" {
		t.Errorf("boundLocations %d and %d locations (%v...), want 150 and the first 100", st.BoundLocations, len(st.Locations), st.Locations[:1])
	}

	st = statusOf(bad, x.Binding(key(bad)), x)
	ready = meta.FindStatusCondition(st.Conditions, controlv1alpha1.LocationBindingReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != controlv1alpha1.ReasonInvalidSpec || st.BoundLocations != 0 || len(st.Locations) != 0 {
		t.Errorf("status of an invalid binding: %+v", st)
	}
}
