package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	ctrlstatuscollector "github.com/cluster-mapper/cluster-mapper/pkg/controller/statuscollector"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestStatusSummaries (issue 14 items 5 and 6) on real servers: three targets, each with a
// real kube-controller-manager (deployment and replicaset controllers), three mappers and
// mapper-controller.
//   - A Deployment with kcp.io/status-policy: Summarize assigned to the three locations gets as
//     .status the sum of the statuses the targets' deployment controllers report (written back
//     by the mappers through their views), without observedGeneration (docs/status.md says
//     why), and the conditions combined; scaling it changes the sums.
//   - A StatusCollector sums replicas and available replicas per region into its StatusSummary,
//     shown by kubectl, and follows the scaling.
//
// With no scheduler and no kubelet the Pods stay Pending, so the controllers report replicas
// and updatedReplicas, no available replicas, and Available=False.
func TestStatusSummaries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	env, regions := startRegionsEnv(t, ctx)
	for l := range regions {
		env.targets[l].StartControllerManager(t)
	}
	framework.StartMapperController(t, ctx, env.source, 40*time.Second)

	web := newDeployment("apps", "web", "east", "north", "west")
	web.Object["spec"].(map[string]interface{})["replicas"] = int64(3)
	ann := web.GetAnnotations()
	ann[contract.StatusPolicyAnnotation] = contract.StatusPolicySummarize
	web.SetAnnotations(ann)
	deployments := env.src.Resource(deploymentsGVR).Namespace("apps")
	if _, err := deployments.Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for l := range regions {
		env.startMapper(t, "mapper-"+l, l, nil, locationMapperArgs...)
	}

	// waitSummary waits until the source's status has replicas and updatedReplicas want.
	waitSummary := func(t *testing.T, want int64) map[string]interface{} {
		t.Helper()
		var st map[string]interface{}
		mapperEventually(t, ctx, 2*time.Minute, fmt.Sprintf("the source's status sums %d replicas", want), func() (bool, string) {
			src, err := deployments.Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			st, _ = src.Object["status"].(map[string]interface{})
			got := fmt.Sprintf("replicas=%v updated=%v available=%v observedGeneration=%v",
				st["replicas"], st["updatedReplicas"], st["availableReplicas"], st["observedGeneration"])
			return got == fmt.Sprintf("replicas=%d updated=%d available=<nil> observedGeneration=<nil>", want, want), got
		})
		return st
	}

	t.Run("Summarize sums the statuses of the three targets", func(t *testing.T) {
		st := waitSummary(t, 9)
		conds, _ := st["conditions"].([]interface{})
		var available map[string]interface{}
		for _, c := range conds {
			if m, _ := c.(map[string]interface{}); m["type"] == "Available" {
				available = m
			}
		}
		if available == nil || available["status"] != "False" || available["reason"] != "MinimumReplicasUnavailable" {
			t.Errorf("Available %v, want False (MinimumReplicasUnavailable) from the controllers", available)
		}
		for l := range regions {
			live := env.targetObject(t, ctx, l, deploymentsGVR, "apps", "web")
			if r, _, _ := unstructured.NestedInt64(live.Object, "status", "replicas"); r != 3 {
				t.Errorf("%s's deployment controller reports %d replicas, want 3", l, r)
			}
		}
	})

	t.Run("a StatusCollector counts replicas per region", func(t *testing.T) {
		collector := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "control.mapper.kcp.io/v1alpha1", "kind": "StatusCollector",
			"metadata": map[string]interface{}{"name": "replicas-by-region", "namespace": "apps"},
			"spec": map[string]interface{}{
				"resources": []interface{}{map[string]interface{}{"apiGroups": []interface{}{"apps"}, "apiVersions": []interface{}{"v1"}, "resources": []interface{}{"deployments"}}},
				"groupBy":   []interface{}{map[string]interface{}{"name": "region", "expression": `location.metadata.labels["region"]`}},
				"combinedFields": []interface{}{
					map[string]interface{}{"name": "replicas", "type": "Sum", "subject": "returned.status.replicas"},
					map[string]interface{}{"name": "available", "type": "Sum", "subject": "has(returned.status.availableReplicas) ? returned.status.availableReplicas : 0"},
					map[string]interface{}{"name": "locations", "type": "Count"},
				},
			},
		}}
		if _, err := env.src.Resource(ctrlstatuscollector.CollectorsResource).Namespace("apps").Create(ctx, collector, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		summaryText := func(want string) {
			t.Helper()
			mapperEventually(t, ctx, 2*time.Minute, "the StatusSummary reads "+want, func() (bool, string) {
				s, err := env.src.Resource(ctrlstatuscollector.SummariesResource).Namespace("apps").Get(ctx, "replicas-by-region", metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				got, _, _ := unstructured.NestedString(s.Object, "results", "text")
				return got == want, got
			})
		}
		summaryText("region=eu: replicas=6,available=0,locations=2; region=us: replicas=3,available=0,locations=1")
		out, err := framework.RunKubectl(t, env.source.AdminKubeconfig(), "get", "statussummaries", "-n", "apps")
		if err != nil || !strings.Contains(string(out), "region=eu: replicas=6") {
			t.Errorf("kubectl get statussummaries: %v\n%s", err, out)
		}

		// Scale the source: each target's controller reports 4, the sums follow.
		if _, err := deployments.Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		summaryText("region=eu: replicas=8,available=0,locations=2; region=us: replicas=4,available=0,locations=1")
		waitSummary(t, 12)
	})
}
