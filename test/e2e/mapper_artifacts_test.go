package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestMapperArtifacts runs a mapper in pull mode as the artifacts set it up, with least
// privilege on both sides: artifacts/mapper/ is installed into a real target kube-apiserver as
// its kustomization says, and the mapper runs on loopback (there is no kubelet) with the
// Deployment's arguments and only the artifacts' ServiceAccount on the target; it reads its view
// through the source's aggregator as the example identity artifacts/examples/mapper-east.yaml.
// It maps, holds its Lease in its namespace, records a conflict Event, reflects status, and
// reports ready.
func TestMapperArtifacts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := startMapperEnv(t, ctx, "east")
	target := env.targets["east"]
	dir, err := filepath.Abs("../../artifacts/mapper")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := framework.RunKubectl(t, target.AdminKubeconfig(), "apply", "-k", dir); err != nil {
		t.Fatal(err)
	}

	// The Deployment's container arguments, with the view kubeconfig, the namespace and the
	// metrics address of this test.
	raw, err := os.ReadFile(filepath.Join(dir, "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var deploy appsv1.Deployment
	if err := yaml.Unmarshal(raw, &deploy); err != nil {
		t.Fatal(err)
	}
	const ns = "cluster-mapper"
	var args []string
	for _, a := range deploy.Spec.Template.Spec.Containers[0].Args {
		switch {
		case strings.HasPrefix(a, "--view-kubeconfig="), strings.HasPrefix(a, "--metrics-bind-address="):
			continue
		}
		args = append(args, strings.ReplaceAll(a, "$(POD_NAMESPACE)", ns))
	}

	// The view through the source's aggregator, as the example identity of east.
	agg := framework.StartAggregatedMapperAPIServer(t, env.source, "--resources="+mapperResources, "--source-discovery-interval=1s")
	examples, err := filepath.Abs("../../artifacts/examples/mapper-east.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := framework.RunKubectl(t, env.source.AdminKubeconfig(), "apply", "-f", examples); err != nil {
		t.Fatal(err)
	}
	viewToken := serviceAccountToken(t, ctx, env.source.Admin().Client(t), "mapper-system", "mapper-east")
	viewCfg := &rest.Config{Host: agg.ViewURL("east"), BearerToken: viewToken, TLSClientConfig: rest.TLSClientConfig{CAData: env.source.ServingCABundle()}}
	viewKC := filepath.Join(t.TempDir(), "view.kubeconfig")
	if err := framework.WriteKubeconfig(viewKC, viewCfg); err != nil {
		t.Fatal(err)
	}
	env.viewKubeconfig["east"] = viewKC
	viewClient, err := dynamic.NewForConfig(viewCfg)
	if err != nil {
		t.Fatal(err)
	}
	mapperEventually(t, ctx, 60*time.Second, "RBAC lets the example identity read east's view", func() (bool, string) {
		_, err := viewClient.Resource(configMapsGVR).List(ctx, metav1.ListOptions{})
		return err == nil, mapperErrString(err)
	})

	token := serviceAccountToken(t, ctx, target.Admin().Client(t), ns, "mapper")
	targetKC := filepath.Join(t.TempDir(), "target.kubeconfig")
	if err := framework.WriteKubeconfig(targetKC, &rest.Config{Host: target.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: target.ServingCABundle()}}); err != nil {
		t.Fatal(err)
	}
	env.targetKubeconfig["east"] = targetKC

	ensureNamespace(t, ctx, env.src, "apps")
	for _, u := range []*unstructured.Unstructured{
		decorateFixture(newConfigMap("apps", "config", "east"), false),
		decorateFixture(newDeployment("apps", "web", "east"), true),
		decorateFixture(newWidget(widgetsGVR, "Widget", "apps", "gizmo", "east"), false),
	} {
		gvr := map[string]schema.GroupVersionResource{"ConfigMap": configMapsGVR, "Deployment": deploymentsGVR, "Widget": widgetsGVR}[u.GetKind()]
		if _, err := env.src.Resource(gvr).Namespace("apps").Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A hand-made object in the place of one more assigned object: a conflict Event.
	ensureNamespace(t, ctx, env.tgt["east"], "apps")
	if _, err := env.tgt["east"].Resource(configMapsGVR).Namespace("apps").Create(ctx, newConfigMap("apps", "taken"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.src.Resource(configMapsGVR).Namespace("apps").Create(ctx, newConfigMap("apps", "taken", "east"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Only the Deployment's arguments and the test's connection settings: not mapperTestArgs.
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	m := &mapperProc{name: "mapper-artifacts", location: "east", owner: t, metricsAddr: "127.0.0.1:" + strconv.Itoa(port)}
	m.args = append([]string{
		"--view-kubeconfig=" + env.viewKubeconfig["east"],
		"--target-kubeconfig=" + targetKC,
		"--metrics-bind-address=" + m.metricsAddr,
		"--discovery-interval=1s",
	}, args...)
	m.start(env.bin)

	mapperEventually(t, ctx, 60*time.Second, "the mapper holds its Lease in "+ns, func() (bool, string) {
		_, err := target.Admin().Client(t).CoordinationV1().Leases(ns).Get(ctx, "cluster-mapper-east", metav1.GetOptions{})
		return err == nil, mapperErrString(err)
	})
	mapperEventually(t, ctx, 60*time.Second, "the conflict Event", func() (bool, string) {
		events, err := target.Admin().Client(t).EventsV1().Events("apps").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.Reason == "MappingConflict" {
				return true, ""
			}
		}
		return false, "none yet"
	})
	mapperEventually(t, ctx, 60*time.Second, "everything but the conflict is mapped", func() (bool, string) {
		r := env.verifyOnce(t, "east")
		return r.Total == 1 && r.Count(1) == 1 && r.Violations[0].Target == "apps/taken", mapperReportText(r)
	})
	mapperEventually(t, ctx, 30*time.Second, "the mapper is ready", func() (bool, string) { return m.ready(), "not ready" })

	// Status write-back through the aggregator with the example identity's update/patch.
	live := env.targetObject(t, ctx, "east", deploymentsGVR, "apps", "web")
	live.Object["status"] = map[string]interface{}{"observedGeneration": int64(1), "replicas": int64(1), "readyReplicas": int64(1)}
	if _, err := env.tgt["east"].Resource(deploymentsGVR).Namespace("apps").UpdateStatus(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mapperEventually(t, ctx, 30*time.Second, "the target status reaches the source", func() (bool, string) {
		src, err := env.src.Resource(deploymentsGVR).Namespace("apps").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		rr, _, _ := unstructured.NestedInt64(src.Object, "status", "readyReplicas")
		return rr == 1, fmt.Sprint(src.Object["status"])
	})
}

func mapperErrString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
