package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

// mapperSumMetric adds the sample of a metric over replicas (only the leader has non-zero values).
func mapperSumMetric(replicas []*mapperProc, name string, labels ...string) float64 {
	total := 0.0
	for _, m := range replicas {
		if v, ok := m.metric(name, labels...); ok {
			total += v
		}
	}
	return total
}

// mapperWaitForSweeps waits until every location of replicas has completed two more orphan
// sweeps (mapper_orphan_sweeps_total{result="completed"}, summed over the location's replicas:
// only the leader sweeps) than when it was called. Sweeps run one after another, so the second
// one started after the call and saw every write made before it: a check that nothing was
// deleted is then a check of a sweep that ran. Skipped and failed sweeps do not count.
func mapperWaitForSweeps(t *testing.T, ctx context.Context, replicas []*mapperProc, what string) {
	t.Helper()
	byLocation := map[string][]*mapperProc{}
	for _, m := range replicas {
		byLocation[m.location] = append(byLocation[m.location], m)
	}
	for location, ms := range byLocation {
		before := mapperSumMetric(ms, "mapper_orphan_sweeps_total", `result="completed"`)
		mapperEventually(t, ctx, 90*time.Second, what+": two orphan sweeps of "+location+" completed", func() (bool, string) {
			now := mapperSumMetric(ms, "mapper_orphan_sweeps_total", `result="completed"`)
			return now >= before+2, "mapper_orphan_sweeps_total{result=\"completed\"} went from " + mapperFtoa(before) + " to " + mapperFtoa(now) +
				"; skipped " + mapperFtoa(mapperSumMetric(ms, "mapper_orphan_sweeps_total", `result="skipped"`)) +
				", failed " + mapperFtoa(mapperSumMetric(ms, "mapper_orphan_sweeps_total", `result="failed"`))
		})
	}
}

// testMapperUnmarkedObject: a target object with the location label but without source
// annotations is reported under invariant 2 and never deleted by the mapper, although orphan
// sweeps see it.
func testMapperUnmarkedObject(t *testing.T, ctx context.Context, env *mapperEnv, replicas []*mapperProc) {
	cm := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": "labelled-only", "namespace": "team-a", "labels": map[string]interface{}{contract.LocationLabel: "east"}},
	}}
	if _, err := env.tgt["east"].Resource(configMapsGVR).Namespace("team-a").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := env.verifyOnce(t, "east")
	if r.Total != 1 || r.Count(2) != 1 || r.Violations[0].Target != "team-a/labelled-only" {
		t.Fatalf("verify should report the unmarked object under invariant 2 only:\n%s", mapperReportText(r))
	}
	mapperWaitForSweeps(t, ctx, replicas, "after the unmarked object was created")
	if env.targetObject(t, ctx, "east", configMapsGVR, "team-a", "labelled-only") == nil {
		t.Fatal("the mapper deleted a labelled object without source annotations")
	}
	if err := env.tgt["east"].Resource(configMapsGVR).Namespace("team-a").Delete(ctx, "labelled-only", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.converge(t, ctx, "removing the unmarked object", "east")
}

// testMapperConflict: an unmanaged target object in the place of an assigned object is not
// overwritten; the mapper reports it (log, metric, Event) and maps the object once the place
// is free.
func testMapperConflict(t *testing.T, ctx context.Context, env *mapperEnv, replicas []*mapperProc) {
	const ns, name = "team-a", "conflicting"
	unmanaged := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": name, "namespace": ns},
		"data":     map[string]interface{}{"owner": "someone else"},
	}}
	if _, err := env.tgt["east"].Resource(configMapsGVR).Namespace(ns).Create(ctx, unmanaged, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := mapperSumMetric(replicas, "mapper_conflicts_total", `resource="configmaps"`)
	if _, err := env.src.Resource(configMapsGVR).Namespace(ns).Create(ctx, decorateFixture(newConfigMap(ns, name, "east"), false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mapperEventually(t, ctx, 30*time.Second, "the conflict is counted", func() (bool, string) {
		cur, now := mapperSumMetric(replicas, "mapper_conflicts", `resource="configmaps"`), mapperSumMetric(replicas, "mapper_conflicts_total", `resource="configmaps"`)
		return cur == 1 && now == before+1, "mapper_conflicts=" + mapperFtoa(cur) + " mapper_conflicts_total=" + mapperFtoa(now)
	})
	mapperEventually(t, ctx, 30*time.Second, "a MappingConflict Event on the target namespace", func() (bool, string) {
		events, err := env.targets["east"].Admin().Client(t).EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.Reason == "MappingConflict" && strings.Contains(e.Note, name) {
				return true, ""
			}
		}
		return false, "no such event"
	})
	r := env.verifyOnce(t, "east")
	if r.Total != 1 || r.Count(1) != 1 || !strings.Contains(r.Violations[0].Message, "does not manage") {
		t.Fatalf("verify should report exactly the conflict:\n%s", mapperReportText(r))
	}
	obj := env.targetObject(t, ctx, "east", configMapsGVR, ns, name)
	if obj.Object["data"].(map[string]interface{})["owner"] != "someone else" || obj.GetLabels()[contract.LocationLabel] != "" {
		t.Fatalf("the mapper changed the unmanaged object: %v", obj.Object)
	}

	if err := env.tgt["east"].Resource(configMapsGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.converge(t, ctx, "freeing the conflicting place", "east")
	if v := mapperSumMetric(replicas, "mapper_conflicts", `resource="configmaps"`); v != 0 {
		t.Errorf("mapper_conflicts is %v after the conflict was resolved", v)
	}
}

// testMapperForeignFieldOwners: a field another manager owns on the target (an autoscaler's
// replicas, set through /scale) is left alone when the source changes, also when the source
// changes that very field; fields the mapper owns follow the source.
func testMapperForeignFieldOwners(t *testing.T, ctx context.Context, env *mapperEnv) {
	key := mapperSortedKeys(env.only(t, ctx, deploymentsGVR, "east", "team-b"), 1)[0]
	ns, name := mapperSplitKey(key)
	client := env.targets["east"].Admin().Client(t)
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 4}}
	if _, err := client.AppsV1().Deployments(ns).UpdateScale(ctx, name, scale, metav1.UpdateOptions{FieldManager: "test-autoscaler"}); err != nil {
		t.Fatal(err)
	}
	env.mutate(t, ctx, deploymentsGVR, ns, name, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(2), "spec", "replicas")
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		containers[0].(map[string]interface{})["image"] = "registry.invalid/app:autoscaled"
		_ = unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers")
	})
	mapperEventually(t, ctx, 30*time.Second, "the image edit reaches the target", func() (bool, string) {
		d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Spec.Template.Spec.Containers[0].Image == "registry.invalid/app:autoscaled", d.Spec.Template.Spec.Containers[0].Image
	})
	env.converge(t, ctx, "editing a deployment whose replicas an autoscaler owns", "east")
	d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(d.Spec.Replicas, 0) != 4 {
		t.Errorf("the target Deployment's replicas are %d, want the autoscaler's 4", ptr.Deref(d.Spec.Replicas, 0))
	}
}

// testMapperControlledObjects: an object with a controller owner reference is made by a source
// controller and not mapped.
func testMapperControlledObjects(t *testing.T, ctx context.Context, env *mapperEnv) {
	controlled := decorateFixture(newConfigMap("team-b", "controlled", "east"), false)
	controlled.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "Deployment", Name: "deploy-00", UID: "00000000-0000-0000-0000-000000000001", Controller: ptr.To(true),
	}})
	sibling := decorateFixture(newConfigMap("team-b", "controlled-sibling", "east"), false)
	for _, u := range []*unstructured.Unstructured{controlled, sibling} {
		if _, err := env.src.Resource(configMapsGVR).Namespace("team-b").Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	env.converge(t, ctx, "creating a controlled object", "east")
	env.present(t, ctx, "creating a controlled object", "east", configMapsGVR, "team-b/controlled-sibling", true)
	env.present(t, ctx, "creating a controlled object", "east", configMapsGVR, "team-b/controlled", false)
}

func mapperFtoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
