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
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestStatusSummaries (issue 14 items 5 and 6) on real servers with three mappers and
// mapper-controller: a Deployment with kcp.io/status-policy: Summarize assigned to three
// locations gets as .status the sum of the statuses its targets report (written back by the
// mappers through their views), without observedGeneration (docs/status.md says why), and the
// Available condition False while one location is not available; a StatusCollector sums
// available replicas per region into its StatusSummary, shown by kubectl, and follows a change.
func TestStatusSummaries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	env := startLocationsEnvFor(t, ctx, "deployments.apps", "east", "north", "west")
	ensureNamespace(t, ctx, env.src, "apps")
	regions := map[string]string{"east": "eu", "north": "eu", "west": "us"}
	for l, r := range regions {
		patch := fmt.Sprintf(`{"metadata":{"labels":{"region":%q}}}`, r)
		if _, err := env.dyn.Resource(synctarget.Resource).Patch(ctx, l, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("labelling %s: %v", l, err)
		}
	}
	ctrlBin := framework.BuildBinary(t, "./cmd/mapper-controller")
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	framework.StartProcess(t, framework.ProcessSpec{Name: "mapper-controller", Path: ctrlBin, Args: []string{
		"--kubeconfig=" + env.source.AdminKubeconfig(), fmt.Sprintf("--bind-address=127.0.0.1:%d", port), "--leader-elect=false", "-v=2",
	}})

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

	// setTargetStatus writes the status a deployment controller would on location's copy:
	// observedGeneration the copy's generation, 3 replicas of which available are available.
	setTargetStatus := func(location string, available int64) {
		t.Helper()
		mapperEventually(t, ctx, 90*time.Second, location+"'s copy of web takes a status", func() (bool, string) {
			live := env.targetObject(t, ctx, location, deploymentsGVR, "apps", "web")
			if live == nil {
				return false, "no copy yet"
			}
			cond := map[string]interface{}{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
				"message": "Deployment has minimum availability.", "lastUpdateTime": "2026-11-24T10:00:00Z", "lastTransitionTime": "2026-11-24T10:00:00Z"}
			if available < 2 {
				cond["status"], cond["reason"], cond["message"] = "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability."
			}
			live.Object["status"] = map[string]interface{}{
				"observedGeneration": live.GetGeneration(), "replicas": int64(3), "updatedReplicas": int64(3),
				"readyReplicas": available, "availableReplicas": available, "conditions": []interface{}{cond},
			}
			_, err := env.tgt[location].Resource(deploymentsGVR).Namespace("apps").UpdateStatus(ctx, live, metav1.UpdateOptions{})
			return err == nil, fmt.Sprint(err)
		})
	}
	available := map[string]int64{"east": 3, "north": 1, "west": 2}
	for l, a := range available {
		setTargetStatus(l, a)
	}

	t.Run("Summarize sums the statuses of the three targets", func(t *testing.T) {
		mapperEventually(t, ctx, 90*time.Second, "the source's status is the sum", func() (bool, string) {
			src, err := deployments.Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			st, _ := src.Object["status"].(map[string]interface{})
			got := fmt.Sprintf("replicas=%v available=%v ready=%v updated=%v observedGeneration=%v",
				st["replicas"], st["availableReplicas"], st["readyReplicas"], st["updatedReplicas"], st["observedGeneration"])
			return got == "replicas=9 available=6 ready=6 updated=9 observedGeneration=<nil>", got
		})
		src, err := deployments.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(src.Object, "status", "conditions")
		if len(conds) != 1 {
			t.Fatalf("conditions %v, want Available only", conds)
		}
		c := conds[0].(map[string]interface{})
		if c["type"] != "Available" || c["status"] != "False" || !strings.HasPrefix(fmt.Sprint(c["message"]), "north: ") {
			t.Errorf("Available %v, want False naming north", c)
		}
	})

	t.Run("a StatusCollector counts available replicas per region", func(t *testing.T) {
		collector := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "control.mapper.kcp.io/v1alpha1", "kind": "StatusCollector",
			"metadata": map[string]interface{}{"name": "available-by-region", "namespace": "apps"},
			"spec": map[string]interface{}{
				"resources": []interface{}{map[string]interface{}{"apiGroups": []interface{}{"apps"}, "apiVersions": []interface{}{"v1"}, "resources": []interface{}{"deployments"}}},
				"groupBy":   []interface{}{map[string]interface{}{"name": "region", "expression": `location.metadata.labels["region"]`}},
				"combinedFields": []interface{}{
					map[string]interface{}{"name": "available", "type": "Sum", "subject": "returned.status.availableReplicas"},
					map[string]interface{}{"name": "locations", "type": "Count"},
				},
			},
		}}
		if _, err := env.src.Resource(ctrlstatuscollector.CollectorsResource).Namespace("apps").Create(ctx, collector, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		summaryText := func(want string) {
			t.Helper()
			mapperEventually(t, ctx, 60*time.Second, "the StatusSummary reads "+want, func() (bool, string) {
				s, err := env.src.Resource(ctrlstatuscollector.SummariesResource).Namespace("apps").Get(ctx, "available-by-region", metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				got, _, _ := unstructured.NestedString(s.Object, "results", "text")
				return got == want, got
			})
		}
		summaryText("region=eu: available=4,locations=2; region=us: available=2,locations=1")
		out, err := framework.RunKubectl(t, env.source.AdminKubeconfig(), "get", "statussummaries", "-n", "apps")
		if err != nil || !strings.Contains(string(out), "region=eu: available=4") {
			t.Errorf("kubectl get statussummaries: %v\n%s", err, out)
		}

		setTargetStatus("west", 3)
		summaryText("region=eu: available=4,locations=2; region=us: available=3,locations=1")
	})
}
