package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// artifactsNamespace is the namespace artifacts/ installs into.
const artifactsNamespace = "mapper-system"

// TestArtifacts installs artifacts/ into a real kube-apiserver the way docs/install.md says
// (serving certificate from `mapper-apiserver serving-cert`, then `kubectl apply -k`), and proves
// that the manifests work: a server-side dry run passes, the APIService with the caBundle that
// kustomize fills in becomes Available for a mapper-apiserver serving the generated certificate
// and running with nothing but the artifacts' ServiceAccount and RBAC, the example identity for
// east reads east's view and nothing else, and the aggregated role lets its holders list
// locations.
func TestArtifacts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	source := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source"})
	admin := source.Admin().Client(t)
	src, err := dynamic.NewForConfig(source.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}

	root, err := filepath.Abs("../../artifacts")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "artifacts")
	copyDir(t, root, dir)
	bin := framework.BuildBinary(t, "./cmd/mapper-apiserver")
	if out, err := exec.CommandContext(ctx, bin, "serving-cert", "--out-dir="+filepath.Join(dir, "serving-cert")).CombinedOutput(); err != nil {
		t.Fatalf("mapper-apiserver serving-cert: %v\n%s", err, out)
	}
	kc := source.AdminKubeconfig()

	rendered, err := framework.RunKubectl(t, kc, "kustomize", dir)
	if err != nil {
		t.Fatal(err)
	}
	objects := decodeAll(t, rendered)
	kinds := sets.New[string]()
	for _, o := range objects {
		kinds.Insert(o.GetKind())
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRoleBinding", "RoleBinding", "ClusterRole", "Deployment", "Service", "PodDisruptionBudget", "APIService", "Secret"} {
		if !kinds.Has(k) {
			t.Errorf("kubectl kustomize artifacts/ has no %s", k)
		}
	}

	t.Run("server-side dry run", func(t *testing.T) {
		// Namespaced objects of a dry run cannot land in a namespace the same dry run only
		// pretends to create, so the namespace is created first (a real apply creates it first,
		// as kubectl applies Namespaces before anything else).
		if _, err := framework.RunKubectl(t, kc, "create", "namespace", artifactsNamespace); err != nil {
			t.Fatal(err)
		}
		out, err := framework.RunKubectl(t, kc, "apply", "--dry-run=server", "-k", dir)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(out, "(server dry run)"); n != len(objects) {
			t.Errorf("the dry run applied %d objects, kustomize renders %d:\n%s", n, len(objects), out)
		}
		out, err = framework.RunKubectl(t, kc, "apply", "--dry-run=server", "-f", filepath.Join(dir, "examples"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "serviceaccount/mapper-east created (server dry run)") {
			t.Errorf("dry run of examples/:\n%s", out)
		}
	})

	// A real installation: everything but running the Deployment's pods (there is no kubelet;
	// mapper-apiserver runs on loopback with the Deployment's arguments and the artifacts'
	// ServiceAccount instead).
	if _, err := framework.RunKubectl(t, kc, "apply", "-k", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := framework.RunKubectl(t, kc, "apply", "-f", filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	// The CRDs, as docs/install.md applies them after the kustomization: the Bound
	// location-access mode (the Deployment's) needs SyncTargets and LocationBindings served
	// before mapper-apiserver is ready, and a LocationBinding binds "apps" to its locations.
	framework.InstallControlCRDs(t, ctx, source)
	framework.InstallControlCRD(t, ctx, source, locationbinding.Resource)
	ensureNamespace(t, ctx, src, "apps")
	setBinding(t, ctx, src, "apps", "east", "west")
	for name, locs := range map[string][]string{"east-app": {"east"}, "west-app": {"west"}, "shared-app": {"east", "west"}} {
		d := newDeployment("apps", name, locs...)
		ann := d.GetAnnotations()
		ann["kcp.io/status-policy"] = "Reflect"
		d.SetAnnotations(ann)
		if _, err := src.Resource(deploymentsGVR).Namespace("apps").Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	serverKC := filepath.Join(t.TempDir(), "mapper-apiserver.kubeconfig")
	token := serviceAccountToken(t, ctx, admin, artifactsNamespace, "mapper-apiserver")
	if err := framework.WriteKubeconfig(serverKC, &rest.Config{Host: source.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: source.ServingCABundle()}}); err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--source-kubeconfig=" + serverKC,
		"--kubeconfig=" + serverKC,
		"--authentication-kubeconfig=" + serverKC,
		"--authorization-kubeconfig=" + serverKC,
		// The generated certificate, for the Service's names, which the aggregator verifies.
		"--tls-sni-cert-key=" + filepath.Join(dir, "serving-cert", "tls.crt") + "," + filepath.Join(dir, "serving-cert", "tls.key"),
	}
	args = append(args, deploymentArgs(t, objects)...)
	server := framework.StartMapperAPIServer(t, source, args...)

	serveAPIServiceFromLoopback(t, ctx, source, artifactsNamespace, server)
	apiServicesGVR := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

	t.Run("example identity for east", func(t *testing.T) {
		eastToken := serviceAccountToken(t, ctx, admin, artifactsNamespace, "mapper-east")
		waitForRBAC(t, ctx, admin, serviceAccountIdentity(artifactsNamespace, "mapper-east"), "watch", "east", true)
		aggregated := route{name: "aggregated", base: source.URL, caData: source.ServingCABundle()}
		list, err := aggregated.view(t, bearer(eastToken), "east").Resource(deploymentsGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("listing east's view as mapper-east: %v", err)
		}
		if want, got := groundTruth(t, ctx, src, deploymentsGVR, "east", ""), keysOf(list.Items); !want.Equal(got) {
			t.Errorf("east's view as mapper-east: %s", diff(want, got))
		}
		_, err = aggregated.view(t, bearer(eastToken), "west").Resource(deploymentsGVR).List(ctx, metav1.ListOptions{})
		expectForbidden(t, "west's view as mapper-east", err, `"west"`)

		// Status write-back with nothing but the artifacts' RBAC for the server: .status of an
		// object of east alone, and the per-location record of a shared one.
		view := aggregated.view(t, bearer(eastToken), "east").Resource(deploymentsGVR).Namespace("apps")
		for _, name := range []string{"east-app", "shared-app"} {
			if _, err := view.Patch(ctx, name, types.MergePatchType, []byte(`{"status":{"observedGeneration":7,"replicas":1}}`), metav1.PatchOptions{}, "status"); err != nil {
				t.Errorf("status patch of %s through east's view: %v", name, err)
			}
		}
		got, err := src.Resource(deploymentsGVR).Namespace("apps").Get(ctx, "east-app", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if g, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration"); g != 7 {
			t.Errorf("east-app's status on the source after the write-back: %v", got.Object["status"])
		}
		shared, err := src.Resource(deploymentsGVR).Namespace("apps").Get(ctx, "shared-app", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rec := shared.GetAnnotations()["status.kcp.io/east"]; !strings.Contains(rec, `"observedGeneration":7`) {
			t.Errorf("shared-app's status record for east on the source: %q", rec)
		}

		// The helper's kubeconfig for this identity works through the aggregator with kubectl.
		saKC := filepath.Join(t.TempDir(), "mapper-east.kubeconfig")
		if err := framework.WriteKubeconfig(saKC, &rest.Config{Host: source.URL, BearerToken: eastToken, TLSClientConfig: rest.TLSClientConfig{CAData: source.ServingCABundle()}}); err != nil {
			t.Fatal(err)
		}
		viewKC := filepath.Join(t.TempDir(), "east.kubeconfig")
		if out, err := exec.CommandContext(ctx, bin, "kubeconfig", "--kubeconfig="+saKC, "--location=east", "-o", viewKC).CombinedOutput(); err != nil {
			t.Fatalf("mapper-apiserver kubeconfig: %v\n%s", err, out)
		}
		out, err := framework.RunKubectl(t, viewKC, "get", "deployments", "-n", "apps", "-o", "name")
		if err != nil {
			t.Fatal(err)
		}
		if want := "deployment.apps/east-app\ndeployment.apps/shared-app\n"; out != want {
			t.Errorf("kubectl get deployments with the helper's kubeconfig for mapper-east:\n%s\nwant:\n%s", out, want)
		}
	})

	t.Run("aggregated view role lists locations", func(t *testing.T) {
		viewer := source.NewUser(t, "location-viewer")
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "location-viewer"},
			// No kube-controller-manager aggregates the built-in view role here, so the
			// aggregated ClusterRole is bound directly.
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "mapper.kcp.io:aggregate-to-view"},
			Subjects: []rbacv1.Subject{userSubject(viewer.Name)},
		}
		if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var out string
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			// east and west have no SyncTarget: listed only on request (docs/locations.md).
			out, err = framework.RunKubectl(t, viewer.KubeconfigPath, "get", "locations", "--field-selector", "status.registered=false")
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("kubectl get locations as a holder of the aggregated role: %v\n%s", err, out)
		}
		if !strings.Contains(out, "east") || !strings.Contains(out, "west") {
			t.Errorf("kubectl get locations:\n%s", out)
		}
		aggregated := route{name: "aggregated", base: source.URL, caData: source.ServingCABundle()}
		_, err = aggregated.view(t, certificate(viewer), "east").Resource(deploymentsGVR).List(ctx, metav1.ListOptions{})
		expectForbidden(t, "east's view with the aggregated view role", err, `"east"`)
	})

	// The server did all of this with the artifacts' RBAC: none of its own requests to the
	// source was refused.
	if log := server.Process.LogTail(100000); strings.Contains(log, "forbidden") {
		var lines []string
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "forbidden") {
				lines = append(lines, l)
			}
		}
		t.Errorf("mapper-apiserver was refused requests with the artifacts' RBAC:\n%s", strings.Join(head(lines), "\n"))
	}

	// docs/install.md, "When the APIService is unavailable": with the server gone, the
	// APIService says why and kubectl reports the group as unable to handle requests.
	t.Run("unavailable", func(t *testing.T) {
		if err := server.Process.Stop(); err != nil {
			t.Fatal(err)
		}
		var cond map[string]interface{}
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			obj, err := src.Resource(apiServicesGVR).Get(ctx, framework.APIServiceName, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			cond, _ = framework.AvailableCondition(obj)
			return cond["status"] == "False", nil
		})
		if err != nil {
			t.Fatalf("the APIService did not turn unavailable: %v", cond)
		}
		if cond["reason"] != "FailedDiscoveryCheck" {
			t.Errorf("Available condition of a stopped server: %v, want reason FailedDiscoveryCheck", cond)
		}
		t.Logf("Available=False: %v: %v", cond["reason"], cond["message"])
		_, err = framework.RunKubectl(t, kc, "get", "locations")
		if err == nil || !strings.Contains(err.Error(), "the server is currently unable to handle the request") {
			t.Errorf("kubectl get locations with the server down: %v", err)
		}
	})
}

// deploymentArgs returns the container arguments of the mapper-apiserver Deployment in objects,
// without those that name the serving port or files inside the pod.
func deploymentArgs(t *testing.T, objects []*unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, a := range containerArgs(t, objects, "mapper-apiserver", "mapper-apiserver") {
		if strings.HasPrefix(a, "--secure-port") || strings.HasPrefix(a, "--tls-") {
			continue
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		t.Fatal("the Deployment's container has no arguments to run with")
	}
	return out
}

// decodeAll decodes a multi-document YAML stream.
func decodeAll(t *testing.T, data string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(data)), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decoding the kustomize output: %v", err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// copyDir copies the regular files below from into to.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		target := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatalf("copying %s: %v", from, err)
	}
}
