package charts

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// applyYAML writes data to a file and runs `kubectl apply --server-side` with it (plus extra
// flags) against kubeconfig, failing the test with kubectl's message on error.
func applyYAML(t *testing.T, kubeconfig, name string, data []byte, extra ...string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := framework.RunKubectl(t, kubeconfig, append([]string{"apply", "--server-side", "-f", file}, extra...)...)
	if err != nil {
		t.Fatalf("applying %s: %v", name, err)
	}
	return out
}

// TestApply applies what the charts render to a real kube-apiserver, which validates every
// object as it would at `helm install` (schemas, RBAC escalation checks for the roles, the
// APIService's service reference): charts/cluster-mapper with its defaults for real, CRDs first,
// as `helm install -n mapper-system --create-namespace` does; the same chart rendered again with
// the cluster to read (`helm upgrade`), which keeps the generated serving certificate; every
// non-default value of TestClusterMapperValues with a server-side dry run; and charts/mapper
// for real, the cluster standing in for a target. (cert-manager's kinds are not applied: the
// test kube-apiserver has no cert-manager CRDs.)
func TestApply(t *testing.T) {
	cp := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "charts"})
	kc := cp.AdminKubeconfig()
	ctx := context.Background()
	for _, ns := range []string{"mapper-system", "cm", "cluster-mapper"} {
		framework.EnsureNamespace(t, ctx, cp, ns)
	}

	install := Options{ReleaseName: "cluster-mapper", Namespace: "mapper-system", Config: cp.AdminConfig()}
	r, err := Render(Dir(ClusterMapper), install)
	if err != nil {
		t.Fatal(err)
	}
	var crds []byte
	for _, crd := range r.CRDs {
		crds = append(append(crds, "---\n"...), crd.File.Data...)
	}
	applyYAML(t, kc, "crds", crds)
	applyYAML(t, kc, "cluster-mapper", r.YAML(false))

	client := cp.Admin().Client(t)
	for _, d := range []string{"mapper-system/mapper-apiserver", "mapper-system/mapper-controller"} {
		ns, name := filepath.Split(d)
		if _, err := client.AppsV1().Deployments(filepath.Clean(ns)).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("Deployment %s after applying the chart: %v", d, err)
		}
	}
	first, err := apiServiceCABundle(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}

	// helm upgrade: lookup finds the Secret, the certificate and so the caBundle stay.
	again, err := Render(Dir(ClusterMapper), install)
	if err != nil {
		t.Fatal(err)
	}
	applyYAML(t, kc, "cluster-mapper-upgrade", again.YAML(false))
	second, err := apiServiceCABundle(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	if first != second || first == "" {
		t.Errorf("a second render with the cluster to read changed the APIService's caBundle (or it is empty): %d bytes, then %d", len(first), len(second))
	}

	values := Options{ReleaseName: "cm", Namespace: "cm", Values: map[string]any{
		"image":             map[string]any{"prefix": "registry.example/cm", "tag": "v1.2.3"},
		"mirroredResources": []any{"configmaps", "widgets.example.com"},
		"source":            map[string]any{"mode": "kcp", "kubeconfigSecret": map[string]any{"name": "kcp"}},
		"apiserver":         map[string]any{"replicas": 3, "extraArgs": []any{"--max-watches-per-user=5"}, "podDisruptionBudget": map[string]any{"enabled": false}},
		"controller":        map[string]any{"enabled": false},
	}}
	nd, err := Render(Dir(ClusterMapper), values)
	if err != nil {
		t.Fatal(err)
	}
	applyYAML(t, kc, "cluster-mapper-values", nd.YAML(false), "--dry-run=server", "--force-conflicts")

	m, err := Render(Dir(Mapper), Options{ReleaseName: "mapper-east", Namespace: "cluster-mapper", Values: map[string]any{
		"location": "east", "mappedResources": []any{"configmaps", "deployments.apps"},
		"viewKubeconfig": map[string]any{"content": "apiVersion: v1\nkind: Config\n"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	applyYAML(t, kc, "mapper", m.YAML(false))
	if _, err := client.AppsV1().Deployments("cluster-mapper").Get(ctx, "mapper-east", metav1.GetOptions{}); err != nil {
		t.Errorf("the mapper's Deployment after applying the chart: %v", err)
	}
}

// apiServiceCABundle returns spec.caBundle of the APIService v1alpha1.mapper.kcp.io in cp.
func apiServiceCABundle(ctx context.Context, cp *framework.ControlPlane) (string, error) {
	d, err := dynamic.NewForConfig(cp.AdminConfig())
	if err != nil {
		return "", err
	}
	u, err := d.Resource(apiregistrationv1.SchemeGroupVersion.WithResource("apiservices")).Get(ctx, "v1alpha1.mapper.kcp.io", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	ca, _, err := unstructured.NestedString(u.Object, "spec", "caBundle")
	return ca, err
}
