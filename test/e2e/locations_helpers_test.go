package e2e

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper/heartbeat"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// startControlSource starts a source control plane alone, with the control CRDs installed,
// and returns it with its admin's dynamic client.
func startControlSource(t *testing.T, ctx context.Context) (*framework.ControlPlane, dynamic.Interface) {
	t.Helper()
	cp := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source"})
	dyn := dynamicClientFor(t, cp)
	framework.InstallControlCRDs(t, ctx, cp)
	return cp, dyn
}

// newSyncTarget returns a SyncTarget named name with labels.
func newSyncTarget(name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{}}
	u.SetAPIVersion(controlv1alpha1.SchemeGroupVersion.String())
	u.SetKind("SyncTarget")
	u.SetName(name)
	u.SetLabels(labels)
	return u
}

// waitSyncTarget polls the SyncTarget name until cond holds, and fails the test with the
// last object otherwise.
func waitSyncTarget(t *testing.T, ctx context.Context, dyn dynamic.Interface, name string, timeout time.Duration, what string, cond func(*controlv1alpha1.SyncTarget) bool) *controlv1alpha1.SyncTarget {
	t.Helper()
	var last *controlv1alpha1.SyncTarget
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(synctarget.Resource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		st, err := synctarget.FromUnstructured(u)
		if err != nil {
			return false, err
		}
		last = st
		return cond(st), nil
	})
	if err != nil {
		t.Fatalf("SyncTarget %s: %s not reached within %s: %v; last status: %+v", name, what, timeout, err, statusOf(last))
	}
	return last
}

// statusOf is a SyncTarget's status for messages (nil-safe).
func statusOf(st *controlv1alpha1.SyncTarget) interface{} {
	if st == nil {
		return nil
	}
	return st.Status
}

// readyIs returns a condition on a SyncTarget's Ready condition.
func readyIs(status metav1.ConditionStatus, reason string) func(*controlv1alpha1.SyncTarget) bool {
	return func(st *controlv1alpha1.SyncTarget) bool {
		c := meta.FindStatusCondition(st.Status.Conditions, controlv1alpha1.SyncTargetReady)
		return c != nil && c.Status == status && (reason == "" || c.Reason == reason)
	}
}

// eventsGVR are events.k8s.io/v1 Events.
var eventsGVR = schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}

// waitEvent waits for an Event with reason about the SyncTarget name.
func waitEvent(t *testing.T, ctx context.Context, dyn dynamic.Interface, name, reason string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := syncTargetEvents(ctx, dyn, name)
		if err != nil {
			return false, nil
		}
		for _, e := range events {
			if r, _, _ := unstructured.NestedString(e.Object, "reason"); r == reason {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no Event %s about SyncTarget %s: %v", reason, name, err)
	}
}

// reportReady makes location, a SyncTarget without a mapper, Ready: pkg/mapper/heartbeat, run
// here until ctx ends, renews its Lease and reports it Ready (Placements give work to Ready
// locations only, docs/placement.md). It returns once the SyncTarget says Ready=True.
func reportReady(t *testing.T, ctx context.Context, source *framework.ControlPlane, dyn dynamic.Interface, location string) {
	t.Helper()
	framework.EnsureNamespace(t, ctx, source, heartbeat.DefaultLeaseNamespace)
	go func() {
		_ = heartbeat.Run(ctx, heartbeat.Config{Location: location, Identity: "e2e-" + location, Version: "e2e", Mode: controlv1alpha1.ModePull,
			Source: source.AdminConfig(), RenewInterval: time.Second, LeaseDuration: 10 * time.Second,
			Observe: func(context.Context, bool) heartbeat.Observation {
				return heartbeat.Observation{Ready: metav1.ConditionTrue, Reason: controlv1alpha1.ReasonMapperReady, Message: "e2e heartbeat"}
			}})
	}()
	waitSyncTarget(t, ctx, dyn, location, time.Minute, "Ready=True", readyIs(metav1.ConditionTrue, ""))
}

// syncTargetEvents lists the Events about SyncTarget name.
func syncTargetEvents(ctx context.Context, dyn dynamic.Interface, name string) ([]unstructured.Unstructured, error) {
	list, err := dyn.Resource(eventsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []unstructured.Unstructured
	for _, e := range list.Items {
		kind, _, _ := unstructured.NestedString(e.Object, "regarding", "kind")
		n, _, _ := unstructured.NestedString(e.Object, "regarding", "name")
		if kind == "SyncTarget" && n == name {
			out = append(out, e)
		}
	}
	return out, nil
}

// eventMessages returns the notes of the Events about SyncTarget name.
func eventMessages(t *testing.T, ctx context.Context, dyn dynamic.Interface, name string) []string {
	t.Helper()
	events, err := syncTargetEvents(ctx, dyn, name)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range events {
		note, _, _ := unstructured.NestedString(e.Object, "note")
		out = append(out, note)
	}
	return out
}
