package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestLocationShards: four shard mappers of one location, with the RBAC of `mapper-apiserver
// grant --shards=4` only, make its SyncTarget Ready with status.shards listing the four and
// status.objects their sum; a SIGKILLed shard makes it Ready=False (ShardsNotReady, naming the
// shard) while the others keep their Leases, not Unknown; started again, Ready=True.
func TestLocationShards(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := startLocationsEnv(t, ctx, "east")
	apiserverBin := framework.BuildBinary(t, "./cmd/mapper-apiserver")
	if out, err := exec.CommandContext(ctx, apiserverBin, "grant", "--location=east", "--shards=4", "--user="+env.users["east"].Name, "--apply",
		"--kubeconfig="+env.source.AdminKubeconfig()).CombinedOutput(); err != nil {
		t.Fatalf("mapper-apiserver grant --shards=4 --apply: %v\n%s", err, out)
	}
	perShard := make([]int64, 4)
	for n := 0; n < 12; n++ {
		ns := fmt.Sprintf("team-%02d", n)
		ensureNamespace(t, ctx, env.src, ns)
		for i := 0; i < 2; i++ {
			if _, err := env.src.Resource(configMapsGVR).Namespace(ns).Create(ctx, newConfigMap(ns, fmt.Sprintf("cm-%d", i), "east"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			perShard[contract.ShardOf(mapper.DefaultClusterName, ns, 4)]++
		}
	}
	t.Logf("objects per shard: %v", perShard)

	const grace = 5 * time.Second
	startLifecycleController(t, env.source, grace)
	shards := make([]*mapperProc, 4)
	for i := range shards {
		shards[i] = env.startMapper(t, fmt.Sprintf("mapper-east-%d", i), "east", nil,
			append([]string{fmt.Sprintf("--shard=%d/4", i), "--namespace-mapping=same"}, locationMapperArgs...)...)
	}

	allReady := func(st *controlv1alpha1.SyncTarget) bool {
		o := st.Status.Objects
		if !readyIs(metav1.ConditionTrue, controlv1alpha1.ReasonMapperReady)(st) || len(st.Status.Shards) != 4 || o == nil || o.Assigned != 24 || o.InSync != 24 || o.InViolation != 0 {
			return false
		}
		for i, s := range st.Status.Shards {
			if s.Name != fmt.Sprintf("shards/%d-of-4", i) || s.Ready != metav1.ConditionTrue || s.Objects == nil || s.Objects.Assigned != perShard[i] || s.Identity == "" {
				return false
			}
		}
		return true
	}
	waitSyncTarget(t, ctx, env.dyn, "east", 3*time.Minute, "Ready=True with 4 shards summing 24 objects", allReady)

	if err := syscall.Kill(-shards[2].proc.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-shards[2].proc.Exited()
	st := waitSyncTarget(t, ctx, env.dyn, "east", time.Minute, "Ready=False ShardsNotReady naming shards/2-of-4", func(st *controlv1alpha1.SyncTarget) bool {
		c := meta.FindStatusCondition(st.Status.Conditions, controlv1alpha1.SyncTargetReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == controlv1alpha1.ReasonShardsNotReady && strings.Contains(c.Message, "shards/2-of-4 (no live mapper")
	})
	if c := meta.FindStatusCondition(st.Status.Conditions, controlv1alpha1.SyncTargetReady); strings.Contains(c.Message, "shards/0-of-4") || strings.Contains(c.Message, "shards/1-of-4") || strings.Contains(c.Message, "shards/3-of-4") {
		t.Errorf("Ready names live shards: %s", c.Message)
	}
	// The location stays False, never Unknown: once the dead shard's Lease is older than the
	// grace period, the lifecycle controller (which reconciles east on every renewal of the
	// live shards' Leases, each second) judges east by its freshest Lease.
	kube := env.source.Admin().Client(t)
	mapperEventually(t, ctx, time.Minute, "the dead shard's Lease is older than the grace period", func() (bool, string) {
		l, err := kube.CoordinationV1().Leases(contract.ControlNamespace).Get(ctx, "east.2-of-4", metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return false, fmt.Sprintf("Lease east.2-of-4: %v", err)
		}
		age := time.Since(l.Spec.RenewTime.Time)
		return age > grace+2*time.Second, fmt.Sprintf("renewed %v ago", age)
	})
	st = waitSyncTarget(t, ctx, env.dyn, "east", 5*time.Second, "still ShardsNotReady after the grace period", readyIs(metav1.ConditionFalse, controlv1alpha1.ReasonShardsNotReady))

	shards[2].restart()
	waitSyncTarget(t, ctx, env.dyn, "east", 2*time.Minute, "Ready=True again with 4 shards", allReady)
}
