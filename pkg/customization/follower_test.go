package customization

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
)

// TestFollowerLocationFromFirstCluster checks the follower's rule for SyncTargets of one
// location name in several logical clusters of a kcp source (see Follower): the location's
// labels are those of the SyncTarget whose cluster sorts first, whatever order they come and go
// in, and the location has none once all are gone. The informer is not run: the store is
// filled as the informer would before calling the handlers (pure logic).
func TestFollowerLocationFromFirstCluster(t *testing.T) {
	f := NewFollower(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), FollowerOptions{})
	target := func(cluster, region string) *controlv1alpha1.SyncTarget {
		return &controlv1alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: "east",
			Labels: map[string]string{"region": region}, Annotations: map[string]string{contract.ClusterAnnotation: cluster}}}
	}
	region := func() string {
		l, ok := f.locs["east"]
		if !ok {
			return "<no location>"
		}
		return l.Labels["region"]
	}
	store := f.targets.GetStore()
	a, b := target("c1", "eu"), target("c2", "us")
	for _, step := range []struct {
		what   string
		do     func() error
		handle func()
		want   string
	}{
		{"c2's added", func() error { return store.Add(b) }, func() { f.setTarget(nil, b) }, "us"},
		{"c1's added", func() error { return store.Add(a) }, func() { f.setTarget(nil, a) }, "eu"},
		{"c2's relabelled", func() error { b = target("c2", "ap"); return store.Update(b) }, func() { f.setTarget(target("c2", "us"), b) }, "eu"},
		{"c1's deleted", func() error { return store.Delete(a) }, func() { f.deleteTarget(a) }, "ap"},
		{"c2's deleted", func() error { return store.Delete(b) }, func() { f.deleteTarget(b) }, "<no location>"},
	} {
		if err := step.do(); err != nil {
			t.Fatal(err)
		}
		step.handle()
		if got := region(); got != step.want {
			t.Errorf("%s: location east has region %s, want %s", step.what, got, step.want)
		}
	}
}

// TestFollowerWaitingNamesWhatIsNotListed: before its informers listed, a Bound follower
// waits for Customizations, SyncTargets and LocationBindings, and says which cannot be listed;
// an Open one does not follow LocationBindings; a nil one waits for nothing. (The informers are
// not run: pure logic.)
func TestFollowerWaitingNamesWhatIsNotListed(t *testing.T) {
	var none *Follower
	if w := none.Waiting(); w != nil {
		t.Errorf("a nil follower waits for %v", w)
	}
	open := NewFollower(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), FollowerOptions{})
	if got, want := strings.Join(open.Waiting(), "; "), "customizations.control.mapper.kcp.io; synctargets.control.mapper.kcp.io"; got != want {
		t.Errorf("Open: waiting for %q, want %q", got, want)
	}
	bound := NewFollower(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), FollowerOptions{Access: locationbinding.ModeBound})
	bound.unavailable[locationbinding.Resource] = true
	want := "customizations.control.mapper.kcp.io; synctargets.control.mapper.kcp.io; " +
		"locationbindings.control.mapper.kcp.io (cannot be listed: not served or forbidden)"
	if got := strings.Join(bound.Waiting(), "; "); got != want {
		t.Errorf("Bound: waiting for %q, want %q", got, want)
	}
}
