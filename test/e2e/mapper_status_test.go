package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestMapperStatusReflection: the test (there is no controller in the test clusters) sets the
// status of target copies; for sources that opted in (kcp.io/status-policy: Reflect) the
// mapper writes it back through the view's /status, and the source's .status follows every
// change; a source without the opt-in keeps its own status. It needs status write-back
// through views (mapper-apiserver).
//
// The reflected Deployment's spec is changed once before the mapper starts, so its view shows
// generation 2 while its copy, created once, has generation 1: the copy's status observes
// generation 1, which the mapper reports as the view generation 2 (docs/status.md), and
// `mapper verify` must compare that (invariant 3), not the copy's raw status.
func TestMapperStatusReflection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := startMapperEnv(t, ctx, "east")
	ensureNamespace(t, ctx, env.src, "status")
	objects := []struct {
		gvr     schema.GroupVersionResource
		obj     *unstructured.Unstructured
		reflect bool
	}{
		{deploymentsGVR, decorateFixture(newDeployment("status", "reflected", "east"), true), true},
		{widgetsGVR, decorateFixture(newWidget(widgetsGVR, "Widget", "status", "reflected", "east"), true), true},
		{deploymentsGVR, decorateFixture(newDeployment("status", "not-reflected", "east"), false), false},
	}
	for _, o := range objects {
		if _, err := env.src.Resource(o.gvr).Namespace("status").Create(ctx, o.obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	env.mutate(t, ctx, deploymentsGVR, "status", "reflected", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(2), "spec", "replicas")
	})
	m := env.startMapper(t, "mapper-east", "east", nil)
	env.converge(t, ctx, "start-up", "east")

	statusOf := map[string]func(round int) map[string]interface{}{
		"deployments": func(round int) map[string]interface{} {
			return map[string]interface{}{
				"observedGeneration": int64(1), "replicas": int64(round), "updatedReplicas": int64(round),
				"readyReplicas": int64(round), "availableReplicas": int64(round),
				"conditions": []interface{}{map[string]interface{}{
					"type": "Available", "status": "True", "reason": fmt.Sprintf("Round%d", round), "message": "set by the test",
					"lastUpdateTime": "2024-01-01T00:00:00Z", "lastTransitionTime": "2024-01-01T00:00:00Z",
				}},
			}
		},
		"widgets": func(round int) map[string]interface{} {
			return map[string]interface{}{"phase": fmt.Sprintf("Ready-%d", round), "observedSize": int64(round)}
		},
	}
	for round := 1; round <= 2; round++ {
		if round == 2 {
			// The second round changes the targets while the mapper is stopped: verify must see
			// the difference (invariant 3), and the restarted mapper must catch up.
			if err := m.proc.Stop(); err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range objects {
			want := statusOf[o.gvr.Resource](round)
			live := env.targetObject(t, ctx, "east", o.gvr, "status", o.obj.GetName())
			if live == nil {
				t.Fatalf("%s status/%s is not on the target", o.gvr.Resource, o.obj.GetName())
			}
			live.Object["status"] = want
			if _, err := env.tgt["east"].Resource(o.gvr).Namespace("status").UpdateStatus(ctx, live, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("setting the status of the target copy: %v", err)
			}
		}
		if round == 2 {
			if r := env.verifyOnce(t, "east"); r.Total != 2 || r.Count(3) != 2 {
				t.Fatalf("with the mapper stopped, verify should report the two opted-in objects under invariant 3:\n%s", mapperReportText(r))
			}
			m.restart()
		}
		for _, o := range objects {
			if !o.reflect {
				continue
			}
			want := statusOf[o.gvr.Resource](round)
			if o.gvr == deploymentsGVR {
				want["observedGeneration"] = int64(2) // the view generation the copy was applied from
			}
			mapperEventually(t, ctx, 30*time.Second, fmt.Sprintf("round %d: the status of %s status/%s reaches the source", round, o.gvr.Resource, o.obj.GetName()), func() (bool, string) {
				src, err := env.src.Resource(o.gvr).Namespace("status").Get(ctx, o.obj.GetName(), metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				return equality.Semantic.DeepEqual(src.Object["status"], want), fmt.Sprintf("source status %v", src.Object["status"])
			})
		}
		env.converge(t, ctx, fmt.Sprintf("status round %d", round), "east")
	}
	src, err := env.src.Resource(deploymentsGVR).Namespace("status").Get(ctx, "not-reflected", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rr, _, _ := unstructured.NestedInt64(src.Object, "status", "readyReplicas"); rr != 0 {
		t.Errorf("the status of a source without the opt-in was written: %v", src.Object["status"])
	}
}
