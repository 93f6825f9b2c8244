package customization

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
)

// TestFollowerBindings checks the follower's handling of LocationBindings in the Bound mode
// (the informers are not run: the handlers are called as the informer would, pure logic): a
// binding binds what it selects over the SyncTargets the follower holds; a change of its status
// keeps the Index (so a view compares nothing); a change of its spec, its deletion, or a
// SyncTarget relabelled makes a new one; the Open mode has no Index.
func TestFollowerBindings(t *testing.T) {
	if f := NewFollower(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), FollowerOptions{}); f.locationBindings != nil || f.currentBindings(nil) != nil {
		t.Fatal("the Open mode follows LocationBindings")
	}
	f := NewFollower(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), FollowerOptions{Access: locationbinding.ModeBound, Options: Options{PlainCluster: "root"}})
	locs := func() []Location {
		var out []Location
		for _, l := range f.locs {
			out = append(out, l)
		}
		return out
	}
	east := &controlv1alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: "east", Labels: map[string]string{"tier": "gold"}}}
	if err := f.targets.GetStore().Add(east); err != nil {
		t.Fatal(err)
	}
	f.setTarget(nil, east)
	gold := &controlv1alpha1.LocationBinding{ObjectMeta: metav1.ObjectMeta{Name: "gold", Namespace: "tenant-a"},
		Spec: controlv1alpha1.LocationBindingSpec{LocationSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}}}
	f.setBinding(nil, gold)
	x := f.currentBindings(locs())
	if !x.Binds("root", "tenant-a", "east") || x.Binds("root", "tenant-b", "east") {
		t.Fatalf("tenant-a's gold binding over east (tier=gold): bound %v", x.Bound("root", "tenant-a"))
	}

	withStatus := gold.DeepCopy()
	withStatus.Status.BoundLocations = 1
	f.setBinding(gold, withStatus)
	if f.currentBindings(locs()) != x {
		t.Error("a change of a LocationBinding's status made a new Index")
	}

	silver := east.DeepCopy()
	silver.Labels = map[string]string{"tier": "silver"}
	if err := f.targets.GetStore().Update(silver); err != nil {
		t.Fatal(err)
	}
	f.setTarget(east, silver)
	if y := f.currentBindings(locs()); y == x || y.Binds("root", "tenant-a", "east") {
		t.Error("east relabelled out of the selector is still bound")
	}

	deleting := withStatus.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	deleting.Spec.LocationSelector = nil
	deleting.Spec.LocationNames = []string{"east"}
	f.setBinding(withStatus, deleting)
	if f.currentBindings(locs()).Binds("root", "tenant-a", "east") {
		t.Error("a LocationBinding marked for deletion binds")
	}
}
