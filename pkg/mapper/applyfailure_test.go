package mapper

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

// TestApplyFailureLoggedOncePerVersion: a failed apply is logged at the default verbosity once
// per version of the view object, with the error truncated; its retries are not, a new
// version that fails again is, and so is a failure after the object was in sync.
func TestApplyFailureLoggedOncePerVersion(t *testing.T) {
	metrics := locationMetrics{location: "log-east"}
	t.Cleanup(metrics.deleteGauges) // the gauges are process-wide (TestMetricsPerLocation reads them)
	m := &Mapper{cfg: Config{Location: "log-east", ClusterName: DefaultClusterName}, states: newObjectStates(metrics)}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(0), ktesting.BufferLogs(true)))
	ctx := klog.NewContext(t.Context(), logger)
	r := &resource{gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
	key := itemKey{GVR: r.gvr, Cluster: DefaultClusterName, Namespace: "ns", Name: "big"}
	obj := func(rv string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap"}}
		u.SetNamespace("ns")
		u.SetName("big")
		u.SetResourceVersion(rv)
		return u
	}
	rejected := errors.New("admission webhook denied the request: " + strings.Repeat("x", 10_000))
	logged := func() int {
		return strings.Count(logger.GetSink().(ktesting.Underlier).GetBuffer().String(), "Cannot apply an object onto the target")
	}

	for i := 0; i < 3; i++ { // the first try and two retries of version 5
		if err := m.applyFailed(ctx, r, key, obj("5"), rejected); !errors.Is(err, rejected) {
			t.Fatalf("applyFailed returned %v, want the apply's error wrapped", err)
		}
	}
	if n := logged(); n != 1 {
		t.Fatalf("version 5 failed 3 times: %d lines at the default verbosity, want 1", n)
	}
	if out := logger.GetSink().(ktesting.Underlier).GetBuffer().String(); len(out) > 2*maxLoggedError || !strings.Contains(out, "more bytes") {
		t.Errorf("the logged error is not truncated (%d bytes logged)", len(out))
	}
	_ = m.applyFailed(ctx, r, key, obj("6"), rejected)
	if n := logged(); n != 2 {
		t.Fatalf("version 6 failed: %d lines, want 2", n)
	}
	m.states.set(key, outcomeMapped)
	_ = m.applyFailed(ctx, r, key, obj("6"), rejected)
	if n := logged(); n != 3 {
		t.Fatalf("version 6 failed again after being in sync: %d lines, want 3", n)
	}
}
