package mapper

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

// TestMetricsPerLocation checks that two mappers of one process (push mode) keep their metrics
// in separate series, labelled with their location, and that a mapper that stops deletes its
// gauge series but leaves the other mapper's and its own counters.
func TestMetricsPerLocation(t *testing.T) {
	// The clients are never used: Run below starts with an ended context.
	unreachable := &rest.Config{Host: "http://127.0.0.1:1"}
	newMapper := func(location string) *Mapper {
		m, err := New(Config{Location: location, View: unreachable, Target: unreachable, NamespaceMapping: NamespaceMappingSame})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	east, west := newMapper("metrics-east"), newMapper("metrics-west")
	key := func(name string) itemKey {
		return itemKey{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Cluster: DefaultClusterName, Namespace: "default", Name: name}
	}
	east.states.set(key("a"), outcomeMapped)
	east.states.set(key("b"), outcomeMapped)
	west.states.set(key("a"), outcomeMapped)
	west.states.set(key("b"), outcomeConflict)
	west.metrics.resourceHalted("gadgets.example.com").Set(1)
	west.metrics.resourceHalted("widgets.example.com").Set(1)
	west.metrics.viewObjects("widgets.example.com").Set(3)
	// A resource the view stops serving drops its own series, and only those.
	stopped := &resource{gvr: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, viewCancel: func() {}}
	stopped.stop(west.metrics)

	names := []string{"mapper_view_objects", "mapper_objects_mapped", "mapper_conflicts", "mapper_conflicts_total", "mapper_namespace_mapping", "mapper_resource_halted"}
	compare := func(want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), names...); err != nil {
			t.Error(err)
		}
	}
	const header = `
# HELP mapper_conflicts [ALPHA] View objects currently in conflict (not mapped, retried with backoff).
# TYPE mapper_conflicts gauge
# HELP mapper_conflicts_total [ALPHA] Times an object went into conflict: the target already has an object of that name the mapper does not manage (or a namespace recording another origin).
# TYPE mapper_conflicts_total counter
mapper_conflicts_total{location="metrics-west",resource="configmaps",shard=""} 1
# HELP mapper_namespace_mapping [ALPHA] 1 for the namespace mapping in force (same or prefixed), once --namespace-mapping=auto is resolved or an explicit mapping is set.
# TYPE mapper_namespace_mapping gauge
# HELP mapper_objects_mapped [ALPHA] View objects whose target copy was applied successfully at their latest version.
# TYPE mapper_objects_mapped gauge
# HELP mapper_resource_halted [ALPHA] 1 while the target does not serve the resource (its CRD is missing): its objects wait until it appears.
# TYPE mapper_resource_halted gauge
`
	compare(header + `
mapper_conflicts{location="metrics-west",resource="configmaps",shard=""} 1
mapper_namespace_mapping{location="metrics-east",mapping="same",shard=""} 1
mapper_namespace_mapping{location="metrics-west",mapping="same",shard=""} 1
mapper_objects_mapped{location="metrics-east",resource="configmaps",shard=""} 2
mapper_objects_mapped{location="metrics-west",resource="configmaps",shard=""} 1
mapper_resource_halted{location="metrics-west",resource="gadgets.example.com",shard=""} 1
`)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := west.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// west's gauges are gone, its counter stays; east's series are untouched.
	compare(header + `
mapper_namespace_mapping{location="metrics-east",mapping="same",shard=""} 1
mapper_objects_mapped{location="metrics-east",resource="configmaps",shard=""} 2
`)
}
