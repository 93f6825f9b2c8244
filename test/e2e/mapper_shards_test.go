package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
)

// shardTestCount and shardTestNamespaces: 4 shards of one location over 20 namespaces of the
// (plain) source, 5 ConfigMaps each.
const (
	shardTestCount      = 4
	shardTestNamespaces = 20
	shardTestPerNS      = 5
)

// TestMapperShards runs four mappers on one location, each with --shard=<i>/4, against one
// target, over 20 namespaces of a plain source (runShards).
func TestMapperShards(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	env := startMapperEnv(t, ctx, "east")
	env.verifyArgs = []string{"--namespace-mapping=same"}
	sc := shardCase{env: env, shardOf: map[string]int{}, mapperArgs: []string{"--namespace-mapping=same"}}
	for n := 0; n < shardTestNamespaces; n++ {
		ns := fmt.Sprintf("shard-ns-%02d", n)
		ensureNamespace(t, ctx, env.src, ns)
		for i := 0; i < shardTestPerNS; i++ {
			cm := newConfigMap(ns, fmt.Sprintf("cm-%d", i), "east")
			if _, err := env.src.Resource(configMapsGVR).Namespace(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			sc.shardOf[ns+"/"+cm.GetName()] = contract.ShardOf(mapper.DefaultClusterName, ns, shardTestCount)
		}
	}
	sc.change = func(key string, change func(*unstructured.Unstructured)) {
		ns, name := mapperSplitKey(key)
		env.mutate(t, ctx, configMapsGVR, ns, name, change)
	}
	runShards(t, ctx, sc)
}

// TestMapperShardsKCP is TestMapperShards with a kcp source (docs/mapper.md, "Shards"):
// mapper-apiserver in --source-mode=kcp behind kcpproxy, 20 logical clusters with one namespace
// of 5 ConfigMaps each, the shards hashing the logical cluster and namespace, and the target
// namespaces prefixed with the cluster (runShards).
func TestMapperShardsKCP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	env := startLogicalClustersEnv(t, ctx, lcOptions{clusters: shardTestNamespaces})
	env.verifyArgs = []string{"--namespace-mapping=prefixed"}
	sc := shardCase{env: env.mapperEnv, shardOf: map[string]int{}, mapperArgs: []string{"--namespace-mapping=prefixed"}}
	source := map[string][3]string{} // target namespace/name -> cluster, namespace, name
	ns := lcNamespace(0)
	for _, c := range env.clusters {
		nsObj := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]interface{}{"name": ns}}}
		if _, err := env.cluster[c].Resource(namespacesGVR).Create(ctx, nsObj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating namespace %s in %s: %v", ns, c, err)
		}
		for i := 0; i < shardTestPerNS; i++ {
			cm := newConfigMap(ns, lcName(i), "east")
			if _, err := env.cluster[c].Resource(configMapsGVR).Namespace(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating %s/%s in %s: %v", ns, cm.GetName(), c, err)
			}
			key := c + "-" + ns + "/" + cm.GetName() // --namespace-mapping=prefixed
			sc.shardOf[key] = contract.ShardOf(c, ns, shardTestCount)
			source[key] = [3]string{c, ns, cm.GetName()}
		}
	}
	sc.change = func(key string, change func(*unstructured.Unstructured)) {
		s := source[key]
		env.mutate(t, ctx, s[0], s[1], s[2], change)
	}
	runShards(t, ctx, sc)
}

// shardCase is a source prepared for runShards.
type shardCase struct {
	// env has east's view and target; shardOf maps each assigned object, by the
	// namespace/name of its copy on east's target, to the shard that owns it.
	env     *mapperEnv
	shardOf map[string]int
	// change changes the source object of the copy key and writes it.
	change func(key string, change func(*unstructured.Unstructured))
	// mapperArgs are the shard mappers' arguments besides --shard.
	mapperArgs []string
}

// runShards starts four mappers on east, each with --shard=<i>/4: together they converge
// (`mapper verify` of the whole location and of each shard: 0 violations, and each shard's
// mapper_objects_mapped is its part). Then one shard is SIGKILLed and every source object
// changes: the other shards apply their changes, their orphan sweeps run, and the killed
// shard's copies stay exactly as they were (same UID and resourceVersion: not touched, not
// deleted), nor are any of the other shards' copies deleted (same UIDs). The killed shard is
// started again and the location converges.
func runShards(t *testing.T, ctx context.Context, sc shardCase) {
	t.Helper()
	env, shardOf := sc.env, sc.shardOf
	perShard := make([]int, shardTestCount)
	for _, s := range shardOf {
		perShard[s]++
	}
	for i, n := range perShard {
		if n == 0 {
			t.Fatalf("shard %d holds no objects (%v): the test cannot show anything about it", i, perShard)
		}
	}
	t.Logf("objects per shard: %v", perShard)

	shards := make([]*mapperProc, shardTestCount)
	for i := range shards {
		shards[i] = env.startMapper(t, fmt.Sprintf("mapper-east-shard-%d", i), "east", nil,
			append([]string{fmt.Sprintf("--shard=%d/%d", i, shardTestCount)}, sc.mapperArgs...)...)
	}
	env.converge(t, ctx, "start-up of 4 shards", "east")
	for i := range shards {
		if r := env.verifyOnce(t, "east", fmt.Sprintf("--shard=%d/%d", i, shardTestCount)); r.Total != 0 {
			t.Fatalf("verify of shard %d: %d violations\n%s", i, r.Total, mapperReportText(r))
		}
		label := fmt.Sprintf(`shard="shards/%d-of-%d"`, i, shardTestCount)
		mapperEventually(t, ctx, 30*time.Second, "mapper_objects_mapped of each shard is its part", func() (bool, string) {
			v, _ := shards[i].metric("mapper_objects_mapped", `resource="configmaps"`, label)
			return v == float64(perShard[i]), fmt.Sprintf("shard %d: mapper_objects_mapped{%s} = %v, want %d", i, label, v, perShard[i])
		})
	}

	// SIGKILL one shard; every source object changes.
	const killed = 2
	before := copiesOf(t, ctx, env)
	if err := syscall.Kill(-shards[killed].proc.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-shards[killed].proc.Exited()
	for key := range shardOf {
		sc.change(key, func(u *unstructured.Unstructured) {
			u.Object["data"] = map[string]interface{}{"key": "changed"}
		})
	}
	live := append(append([]*mapperProc{}, shards[:killed]...), shards[killed+1:]...)
	mapperEventually(t, ctx, 60*time.Second, "the live shards apply every change of their part", func() (bool, string) {
		now := copiesOf(t, ctx, env)
		for key, s := range shardOf {
			if s != killed && now[key].data != "changed" {
				return false, key + " (shard " + fmt.Sprint(s) + ") is not changed yet"
			}
		}
		return true, ""
	})
	// Sweeps of the live shards ran after the kill and after the changes.
	for _, m := range live {
		mapperWaitForSweeps(t, ctx, []*mapperProc{m}, "after shard "+fmt.Sprint(killed)+" was killed")
	}
	after := copiesOf(t, ctx, env)
	for key, s := range shardOf {
		b, a := before[key], after[key]
		switch {
		case a.uid == "":
			t.Errorf("%s (shard %d) was deleted from the target while shard %d was down", key, s, killed)
		case a.uid != b.uid:
			t.Errorf("%s (shard %d) was re-created (uid %s -> %s)", key, s, b.uid, a.uid)
		case s == killed && (a.rv != b.rv || a.data == "changed"):
			t.Errorf("%s of the killed shard %d changed on the target (resourceVersion %s -> %s, data %q)", key, s, b.rv, a.rv, a.data)
		}
	}
	if v := mapperSumMetric(live, "mapper_deletes_total"); v != 0 {
		t.Errorf("the live shards deleted %v copies, want none", v)
	}
	if r := env.verifyOnce(t, "east"); r.Count(1) != perShard[killed] || r.Total != perShard[killed] {
		t.Errorf("verify while shard %d is down: want exactly its %d objects out of date\n%s", killed, perShard[killed], mapperReportText(r))
	}

	// Resume: the killed shard catches up.
	shards[killed].restart()
	env.converge(t, ctx, "shard "+fmt.Sprint(killed)+" resumed", "east")
	final := copiesOf(t, ctx, env)
	for key := range shardOf {
		if final[key].uid != before[key].uid || final[key].data != "changed" {
			t.Errorf("%s after the resume: uid %s (was %s), data %q", key, final[key].uid, before[key].uid, final[key].data)
		}
	}
}

// targetCopy is what TestMapperShards compares of a target copy.
type targetCopy struct{ uid, rv, data string }

// copiesOf returns east's target copies of the shard test's ConfigMaps by namespace/name.
func copiesOf(t *testing.T, ctx context.Context, env *mapperEnv) map[string]targetCopy {
	t.Helper()
	list, err := env.tgt["east"].Resource(configMapsGVR).List(ctx, metav1.ListOptions{LabelSelector: contract.LocationLabel + "=east"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]targetCopy{}
	for _, u := range list.Items {
		data, _, _ := unstructured.NestedString(u.Object, "data", "key")
		out[u.GetNamespace()+"/"+u.GetName()] = targetCopy{uid: string(u.GetUID()), rv: u.GetResourceVersion(), data: data}
	}
	return out
}
