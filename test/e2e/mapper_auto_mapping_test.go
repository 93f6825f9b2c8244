package e2e

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMapperAutoMappingKeepsTheTargetsMapping checks that --namespace-mapping=auto (the
// default) never flips the mapping of a filled target: a target filled with
// --namespace-mapping=prefixed stays prefixed after a restart with auto, although the view
// (a plain source, one logical cluster) alone would resolve to same. The copies keep their
// UIDs through orphan sweeps (nothing was moved), a new object lands at its prefixed place,
// and `mapper verify` with auto resolves the same way and reports per logical cluster.
func TestMapperAutoMappingKeepsTheTargetsMapping(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := startMapperEnv(t, ctx, "east")
	ensureNamespace(t, ctx, env.src, "team-a")
	for i := 0; i < 5; i++ {
		if _, err := env.src.Resource(configMapsGVR).Namespace("team-a").Create(ctx, newConfigMap("team-a", fmt.Sprintf("config-%d", i), "east"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// A fresh target and a view of one cluster: auto would say same. Fill it as prefixed.
	env.verifyArgs = []string{"--namespace-mapping=prefixed"}
	first := env.startMapper(t, "mapper-east-prefixed", "east", nil, "--namespace-mapping=prefixed")
	env.converge(t, ctx, "mapping with an explicit prefixed mapping", "east")
	before := mapperTargetUIDs(t, ctx, env.tgt["east"], configMapsGVR, "east")
	if len(before) != 5 || before["default-team-a/config-0"] == "" {
		t.Fatalf("the prefixed copies are not where expected: %v", before)
	}
	if err := first.proc.Stop(); err != nil {
		t.Fatal(err)
	}

	// Restart with the default (auto): the copies on the target decide.
	env.verifyArgs = nil
	m := env.startMapper(t, "mapper-east-auto", "east", nil)
	mapperEventually(t, ctx, 60*time.Second, "auto resolves to the target's mapping", func() (bool, string) {
		p, _ := m.metric("mapper_namespace_mapping", `mapping="prefixed"`)
		s, _ := m.metric("mapper_namespace_mapping", `mapping="same"`)
		return p == 1 && s == 0, fmt.Sprintf("mapper_namespace_mapping prefixed=%v same=%v", p, s)
	})
	if _, err := env.src.Resource(configMapsGVR).Namespace("team-a").Create(ctx, newConfigMap("team-a", "config-new", "east"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.converge(t, ctx, "a new object after the restart with auto", "east")
	mapperWaitForSweeps(t, ctx, []*mapperProc{m}, "after the restart with auto")

	after := mapperTargetUIDs(t, ctx, env.tgt["east"], configMapsGVR, "east")
	if after["default-team-a/config-new"] == "" {
		t.Fatalf("the new object is not at its prefixed place: %v", after)
	}
	delete(after, "default-team-a/config-new")
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("copies were moved or re-created:\nbefore %v\nafter  %v", before, after)
	}
	if v, _ := m.metric("mapper_deletes_total", `resource="configmaps"`); v != 0 {
		t.Fatalf("the mapper deleted %v copies", v)
	}

	r := env.verifyOnce(t, "east")
	if r.NamespaceMapping != "prefixed" || !strings.Contains(r.NamespaceMappingReason, "copies placed by") {
		t.Fatalf("verify resolved auto to %q (%s)", r.NamespaceMapping, r.NamespaceMappingReason)
	}
	if c, ok := r.Cluster(plainClusterName); !ok || c.Assigned != 6 || c.InSync != 6 || c.Violations != 0 || len(r.Clusters) != 1 {
		t.Fatalf("per-cluster report:\n%s", mapperReportText(r))
	}
}
