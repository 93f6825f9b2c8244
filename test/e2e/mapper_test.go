package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var mapperLocations = []string{"east", "west"}

// TestMapper runs the mapper end to end: a real source kube-apiserver with 500 objects
// assigned to random subsets of east and west, a real mapper-apiserver, a target
// kube-apiserver per location and the mapper binary (two replicas for east, one for west),
// judged by `mapper verify` and by direct reads of the targets. The subtests share the
// environment and run in order.
func TestMapper(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	env := startMapperEnv(t, ctx, mapperLocations...)
	createMapperFixtures(t, ctx, env.src, mapperLocations)

	// An orphan on east's target before any mapper runs: a copy of a source that does not
	// exist. The mapper's sweep must delete it.
	ensureNamespace(t, ctx, env.tgt["east"], "team-a")
	orphan := decorateFixture(newConfigMap("team-a", "orphan", "east"), false)
	setAssignment(orphan)
	orphan.SetLabels(map[string]string{contract.LocationLabel: "east"})
	orphan.SetAnnotations(map[string]string{
		contract.SourceClusterAnnotation: "default", contract.SourceNamespaceAnnotation: "team-a", contract.SourceNameAnnotation: "orphan",
	})
	if _, err := env.tgt["east"].Resource(configMapsGVR).Namespace("team-a").Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Before any mapper runs, verify must see every assigned object missing (and the orphan):
	// it can fail.
	for _, l := range mapperLocations {
		want := 0
		for _, gvr := range mappedGVRs {
			want += mapperAssignedTo(t, ctx, env.src, gvr, l).Len()
		}
		wantOrphans := map[string]int{"east": 1, "west": 0}[l]
		r := env.verifyOnce(t, l)
		if r.Count(1) != want || r.Count(4) != wantOrphans || r.Total != want+wantOrphans {
			t.Fatalf("verify of %s before any mapper ran: %d violations of invariant 1 and %d of invariant 4 (total %d), want %d and %d\n%s",
				l, r.Count(1), r.Count(4), r.Total, want, wantOrphans, mapperReportText(r))
		}
		t.Logf("%s: %d assigned objects, all reported missing before the mapper starts", l, want)
	}

	start := time.Now()
	east := []*mapperProc{
		// Two replicas side by side (one leads), with client-go's streaming lists.
		env.startMapper(t, "mapper-east-1", "east", []string{"KUBE_FEATURE_WatchListClient=true"}),
		env.startMapper(t, "mapper-east-2", "east", []string{"KUBE_FEATURE_WatchListClient=true"}),
	}
	// One replica with classic list and watch.
	west := []*mapperProc{env.startMapper(t, "mapper-west-1", "west", []string{"KUBE_FEATURE_WatchListClient=false"})}
	env.converge(t, ctx, "start-up", mapperLocations...)
	t.Logf("initial sync of both locations verified %v after the mappers started", time.Since(start).Round(time.Millisecond))
	mapperEventually(t, ctx, 30*time.Second, "every replica reports ready", func() (bool, string) {
		for _, m := range append(append([]*mapperProc{}, east...), west...) {
			if !m.ready() {
				return false, m.name + " is not ready"
			}
		}
		return true, ""
	})
	if env.targetObject(t, ctx, "east", configMapsGVR, "team-a", "orphan") != nil {
		t.Fatal("the orphan survived the start-up")
	}
	if v := mapperSumMetric(east, "mapper_deletes_total", `resource="configmaps"`, `reason="sweep"`); v != 1 {
		t.Errorf("mapper_deletes_total{reason=sweep} of east is %v, want 1 (the orphan)", v)
	}
	if v := mapperSumMetric(west, "mapper_objects_mapped", `resource="configmaps"`); v != float64(mapperAssignedTo(t, ctx, env.src, configMapsGVR, "west").Len()) {
		t.Errorf("mapper_objects_mapped{resource=configmaps} of west is %v, want every assigned ConfigMap", v)
	}

	all := append(append([]*mapperProc{}, east...), west...)
	steps := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"unmarked objects are reported, never deleted", func(t *testing.T) { testMapperUnmarkedObject(t, ctx, env, east) }},
		{"scripted sequence", func(t *testing.T) { testMapperSequence(t, ctx, env) }},
		{"controlled objects are not mapped", func(t *testing.T) { testMapperControlledObjects(t, ctx, env) }},
		{"conflict with an unmanaged object", func(t *testing.T) { testMapperConflict(t, ctx, env, east) }},
		{"fields other managers own stay theirs", func(t *testing.T) { testMapperForeignFieldOwners(t, ctx, env) }},
		{"a resource missing on the target halts", func(t *testing.T) { testMapperHaltedResource(t, ctx, env, west) }},
		{"mapper-apiserver outage", func(t *testing.T) { testMapperViewOutage(t, ctx, env, all) }},
		{"ten SIGKILLs", func(t *testing.T) { testMapperKillRestart(t, ctx, env, all) }},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.fn) {
			t.FailNow() // later steps build on the state this one left
		}
	}
}
