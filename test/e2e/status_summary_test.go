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

// TestStatusSummaries on real servers: three targets, each with a
// real kube-controller-manager (deployment and replicaset controllers), three mappers and
// mapper-controller.
//   - A Deployment with kcp.io/status-policy: Summarize assigned to the three locations gets as
//     .status the sum of the statuses the targets' deployment controllers report (written back
//     by the mappers through their views), the conditions combined, and observedGeneration
//     equal to its metadata.generation once every target's controller observed its copy;
//     scaling it changes the sums.
//   - kcp mode (objects and collectors carrying kcp.io/cluster): a StatusCollector summarizes
//     only the objects of its own logical cluster.
//   - With west's kube-controller-manager stopped, a scaling reaches the sums of east and
//     north while observedGeneration stays below the scaled generation; when west's controller
//     runs again, observedGeneration catches up.
//   - A StatusCollector sums replicas and available replicas per region into its StatusSummary,
//     shown by kubectl, and follows the scaling.
//
// With no scheduler and no kubelet the Pods stay Pending, so the controllers report replicas
// and updatedReplicas, no available replicas, and Available=False.
func TestStatusSummaries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	env, regions := startRegionsEnv(t, ctx)
	controllers := map[string]*framework.Process{}
	for l := range regions {
		controllers[l] = env.targets[l].StartControllerManager(t)
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

	// waitSummary waits until the source's status has replicas and updatedReplicas want, and,
	// when observed is set, observedGeneration equal to the source's metadata.generation. It
	// returns that status and generation.
	waitSummary := func(t *testing.T, want int64, observed bool) (map[string]interface{}, int64) {
		t.Helper()
		var st map[string]interface{}
		var generation int64
		mapperEventually(t, ctx, 2*time.Minute, fmt.Sprintf("the source's status sums %d replicas (observed: %v)", want, observed), func() (bool, string) {
			src, err := deployments.Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			st, _ = src.Object["status"].(map[string]interface{})
			generation = src.GetGeneration()
			got := fmt.Sprintf("replicas=%v updated=%v available=%v", st["replicas"], st["updatedReplicas"], st["availableReplicas"])
			ok := got == fmt.Sprintf("replicas=%d updated=%d available=<nil>", want, want)
			if observed {
				ok = ok && st["observedGeneration"] == generation
			}
			return ok, fmt.Sprintf("%s observedGeneration=%v generation=%d", got, st["observedGeneration"], generation)
		})
		return st, generation
	}

	t.Run("Summarize sums the statuses of the three targets", func(t *testing.T) {
		st, _ := waitSummary(t, 9, true)
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
		summaryText := func(want string) { waitSummaryText(t, ctx, env, "apps", "replicas-by-region", want) }
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
		waitSummary(t, 12, true)
	})

	t.Run("kcp mode: a StatusCollector summarizes only its logical cluster", func(t *testing.T) {
		ensureNamespace(t, ctx, env.src, "tenants")
		tenants := env.src.Resource(deploymentsGVR).Namespace("tenants")
		for c, replicas := range map[string]int64{"tenant-a": 1, "tenant-b": 2} {
			d := newDeployment("tenants", "web-"+c, "east")
			d.Object["spec"].(map[string]interface{})["replicas"] = replicas
			d.SetAnnotations(map[string]string{contract.ClusterAnnotation: c, contract.AssignedLocationsAnnotation: d.GetAnnotations()[contract.AssignedLocationsAnnotation],
				contract.StatusPolicyAnnotation: contract.StatusPolicyReflect})
			if _, err := tenants.Create(ctx, d, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		collector := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "control.mapper.kcp.io/v1alpha1", "kind": "StatusCollector",
			"metadata": map[string]interface{}{"name": "replicas", "namespace": "tenants",
				"annotations": map[string]interface{}{contract.ClusterAnnotation: "tenant-a"}},
			"spec": map[string]interface{}{
				"resources":      []interface{}{map[string]interface{}{"apiGroups": []interface{}{"apps"}, "apiVersions": []interface{}{"v1"}, "resources": []interface{}{"deployments"}}},
				"combinedFields": []interface{}{map[string]interface{}{"name": "replicas", "type": "Sum", "subject": "returned.status.replicas"}},
			},
		}}
		if _, err := env.src.Resource(ctrlstatuscollector.CollectorsResource).Namespace("tenants").Create(ctx, collector, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		summary := func(want string) { waitSummaryText(t, ctx, env, "tenants", "replicas", want) }
		summary("replicas=1")
		// tenant-b's status is on the source: every summary computed from now on has its row
		// at hand, and must leave it out.
		mapperEventually(t, ctx, 2*time.Minute, "tenant-b's Deployment reports 2 replicas", func() (bool, string) {
			d, err := tenants.Get(ctx, "web-tenant-b", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			r, _, _ := unstructured.NestedInt64(d.Object, "status", "replicas")
			return r == 2, fmt.Sprint(r)
		})
		if _, err := tenants.Patch(ctx, "web-tenant-a", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		summary("replicas=3")
	})

	t.Run("observedGeneration waits for every location", func(t *testing.T) {
		controllers["west"].Stop()
		scaled, err := deployments.Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// east and north observed the scaling (5 each), west did not (still 4): the summary
		// must not claim the scaled generation.
		st, generation := waitSummary(t, 14, false)
		if g, ok := st["observedGeneration"].(int64); !ok || g >= scaled.GetGeneration() {
			t.Fatalf("observedGeneration %v (source at %d, scaled at %d) while west's controller has not observed the scaling", st["observedGeneration"], generation, scaled.GetGeneration())
		}
		controllers["west"] = env.targets["west"].StartControllerManager(t)
		waitSummary(t, 15, true)
	})
}

// waitSummaryText waits until the StatusSummary namespace/name of the source reads want
// (results.text).
func waitSummaryText(t *testing.T, ctx context.Context, env *locationsEnv, namespace, name, want string) {
	t.Helper()
	mapperEventually(t, ctx, 2*time.Minute, "the StatusSummary "+namespace+"/"+name+" reads "+want, func() (bool, string) {
		s, err := env.src.Resource(ctrlstatuscollector.SummariesResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got, _, _ := unstructured.NestedString(s.Object, "results", "text")
		return got == want, got
	})
}
