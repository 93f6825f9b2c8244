package heartbeat

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
)

// TestTickReportsSpec: every renewal hands the SyncTarget's spec to Config.Spec; no
// SyncTarget (404) or no right to read it (403) hands nil (not paused); another error (the
// source unreachable) hands nothing, so that what was read last stays in force.
func TestTickReportsSpec(t *testing.T) {
	paused := &controlv1alpha1.SyncTarget{Spec: controlv1alpha1.SyncTargetSpec{Paused: true, HaltedResources: []string{"configmaps"}}}
	paused.Name = "east"
	gr := schema.GroupResource{Group: controlv1alpha1.GroupName, Resource: "synctargets"}
	for _, c := range []struct {
		name      string
		get       func() (runtime.Object, error)
		called    bool
		wantPause bool
	}{
		{"paused", func() (runtime.Object, error) { u, err := synctarget.ToUnstructured(paused); return u, err }, true, true},
		{"not found", func() (runtime.Object, error) { return nil, apierrors.NewNotFound(gr, "east") }, true, false},
		{"forbidden", func() (runtime.Object, error) { return nil, apierrors.NewForbidden(gr, "east", errors.New("no")) }, true, false},
		{"unreachable", func() (runtime.Object, error) { return nil, errors.New("connection refused") }, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{synctarget.Resource: "SyncTargetList"})
			client.PrependReactor("get", "synctargets", func(clienttesting.Action) (bool, runtime.Object, error) {
				obj, err := c.get()
				return true, obj, err
			})
			var got *controlv1alpha1.SyncTargetSpec
			called := false
			w := &statusWriter{client: synctarget.NewClient(client), cfg: Config{
				Location: "east", Identity: "test",
				Observe: func(context.Context, bool) Observation { return Observation{} },
				Spec: func(_ context.Context, spec *controlv1alpha1.SyncTargetSpec) {
					called, got = true, spec
				},
			}}
			w.tick(context.Background())
			if called != c.called {
				t.Fatalf("Spec called: %v, want %v", called, c.called)
			}
			if c.wantPause && (got == nil || !got.Paused || len(got.HaltedResources) != 1) {
				t.Errorf("Spec got %+v, want the SyncTarget's spec", got)
			}
			if !c.wantPause && got != nil {
				t.Errorf("Spec got %+v, want nil", got)
			}
		})
	}
}
