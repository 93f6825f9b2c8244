package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
	"github.com/cluster-mapper/cluster-mapper/test/charts"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
	"github.com/cluster-mapper/cluster-mapper/test/images"
)

// shippedBinaries returns the paths of mapper-apiserver, mapper and mapper-controller as they
// ship: taken out of the images `make images-save` writes (hack/images.sh) when an image builder
// is on PATH, else the static binaries hack/images.sh builds for them, built the same way. It
// says which in the test log.
func shippedBinaries(t *testing.T, root string) map[string]string {
	t.Helper()
	out := t.TempDir()
	names := []string{"mapper-apiserver", "mapper", "mapper-controller"}
	bins := map[string]string{}
	builder := images.Builder()
	if builder == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no image builder (buildah or podman) in CI; .ci/run installs buildah")
		}
		t.Log("no image builder: running the static binaries hack/images.sh builds for the images")
		if _, err := images.Hack(root, out, "localhost/cluster-mapper-install-test", "", "binaries"); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			bins[n] = filepath.Join(out, "bin", n)
		}
		return bins
	}
	repo := "localhost/cluster-mapper-install-test"
	refs, err := images.Refs(root, repo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := images.Remove(builder, refs); err != nil {
			t.Log(err)
		}
	})
	if _, err := images.Hack(root, out, repo, builder, "save"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, n := range names {
		img, err := images.ReadArchive(filepath.Join(out, n+".tar"))
		if err != nil {
			t.Fatal(err)
		}
		if bins[n], err = img.ExtractEntrypoint(dir); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("running the binaries taken out of the images %s/{%s} (%s)", repo, strings.Join(names, ","), builder)
	return bins
}

// tokenKubeconfig writes a kubeconfig for cp with a token of the ServiceAccount namespace/name
// (created when missing), as a pod of that ServiceAccount would reach its cluster, and returns
// its path.
func tokenKubeconfig(t *testing.T, ctx context.Context, cp *framework.ControlPlane, namespace, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	token := serviceAccountToken(t, ctx, cp.Admin().Client(t), namespace, name)
	if err := framework.WriteKubeconfig(path, &rest.Config{Host: cp.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: cp.ServingCABundle()}}); err != nil {
		t.Fatal(err)
	}
	return path
}

// helmInstall renders the chart as `helm install <release> <chart> -n <namespace>` does (lookup
// reads cp) and applies it to cp as Helm would: the namespace, the CRDs, then the manifests.
func helmInstall(t *testing.T, ctx context.Context, cp *framework.ControlPlane, chart, release, namespace string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	framework.EnsureNamespace(t, ctx, cp, namespace)
	r, err := charts.Render(charts.Dir(chart), charts.Options{ReleaseName: release, Namespace: namespace, Values: values, Config: cp.AdminConfig()})
	if err != nil {
		t.Fatal(err)
	}
	for _, docs := range [][]byte{crdsYAML(r), r.YAML(false)} {
		if len(docs) == 0 {
			continue
		}
		file := filepath.Join(t.TempDir(), release+".yaml")
		if err := os.WriteFile(file, docs, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := framework.RunKubectl(t, cp.AdminKubeconfig(), "apply", "--server-side", "-f", file); err != nil {
			t.Fatalf("installing %s: %v\n%s", chart, err, out)
		}
	}
	if len(r.CRDs) > 0 {
		framework.InstallControlCRDs(t, ctx, cp) // waits until the CRDs (the same files) are served
	}
	return decodeAll(t, string(r.YAML(false)))
}

func crdsYAML(r *charts.Release) []byte {
	var b []byte
	for _, crd := range r.CRDs {
		b = append(append(b, "---\n"...), crd.File.Data...)
	}
	return b
}

// withoutArgs drops the arguments of args that start with one of prefixes and replaces
// $(POD_NAMESPACE) by namespace, as the kubelet expands it.
func withoutArgs(args []string, namespace string, prefixes ...string) []string {
	var out []string
next:
	for _, a := range args {
		for _, p := range prefixes {
			if strings.HasPrefix(a, p) {
				continue next
			}
		}
		out = append(out, strings.ReplaceAll(a, "$(POD_NAMESPACE)", namespace))
	}
	return out
}

// TestInstall follows docs/install.md on the test control planes, as far as no kubelet is
// needed, with the binaries that ship (shippedBinaries): charts/cluster-mapper installed into the
// source (rendered with Helm's library, applied with kubectl), mapper-apiserver and
// mapper-controller running as processes with their Deployments' arguments and their
// ServiceAccounts, the APIService Available through the aggregator with the chart's generated
// certificate; a location added with `mapper-apiserver grant` and `mapper-apiserver kubeconfig`,
// its view served; charts/mapper installed into the target with that kubeconfig, the mapper
// running as a process with its Deployment's arguments and ServiceAccount: the assigned objects
// land on the target, the location turns Ready, and `mapper verify` finds every invariant held;
// then the deletion protocol works with the charts' RBAC (installedDeletion).
func TestInstall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bins := shippedBinaries(t, root)
	for name, path := range bins {
		framework.UseBinary(t, "./cmd/"+name, path)
	}
	planes := framework.StartControlPlanes(t, framework.ControlPlaneOptions{Name: "source"}, framework.ControlPlaneOptions{Name: "target-east"})
	source, target := planes[0], planes[1]
	kc := source.AdminKubeconfig()
	src, err := dynamic.NewForConfig(source.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, bins[name], args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	// "Install into the source": helm install cluster-mapper charts/cluster-mapper -n mapper-system.
	const ns = "mapper-system"
	objects := helmInstall(t, ctx, source, charts.ClusterMapper, "cluster-mapper", ns, nil)
	certDir := t.TempDir()
	secret, err := source.Admin().Client(t).CoreV1().Secrets(ns).Get(ctx, "mapper-apiserver-serving-cert", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's serving certificate: %v", err)
	}
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(certDir, f), secret.Data[f], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// mapper-apiserver as a pod of the Deployment would run: its arguments, the chart's
	// ServiceAccount (in-cluster config), the Secret's certificate (which the aggregator verifies
	// against the caBundle the chart set); only the port is the test's.
	serverKC := tokenKubeconfig(t, ctx, source, ns, "mapper-apiserver")
	server := framework.StartMapperAPIServer(t, source, append([]string{
		"--source-kubeconfig=" + serverKC, "--kubeconfig=" + serverKC,
		"--authentication-kubeconfig=" + serverKC, "--authorization-kubeconfig=" + serverKC,
		"--tls-sni-cert-key=" + filepath.Join(certDir, "tls.crt") + "," + filepath.Join(certDir, "tls.key"),
	}, deploymentArgs(t, objects)...)...)
	serveAPIServiceFromLoopback(t, ctx, source, ns, server)
	if out, err := framework.RunKubectl(t, kc, "get", "locations"); err != nil {
		t.Fatalf("kubectl get locations through the aggregator: %v", err)
	} else {
		t.Logf("kubectl get locations:\n%s", out)
	}

	// mapper-controller likewise: its Deployment's arguments and ServiceAccount; it leads.
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctrl := framework.StartProcess(t, framework.ProcessSpec{Name: "mapper-controller", Path: bins["mapper-controller"], Args: append(
		withoutArgs(containerArgs(t, objects, "mapper-controller", "mapper-controller"), ns, "--bind-address"),
		"--kubeconfig="+tokenKubeconfig(t, ctx, source, ns, "mapper-controller"), fmt.Sprintf("--bind-address=127.0.0.1:%d", port))})
	mapperEventually(t, ctx, time.Minute, "mapper-controller leads with the chart's RBAC", func() (bool, string) {
		l, err := source.Admin().Client(t).CoordinationV1().Leases(contract.ControlNamespace).Get(ctx, "mapper-controller", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return false, fmt.Sprintf("lease: %v\n%s", err, ctrl.LogTail(20))
		}
		return true, ""
	})

	// "Add a location": a SyncTarget, an identity granted east's view, its kubeconfig.
	if _, err := src.Resource(synctarget.Resource).Create(ctx, newSyncTarget("east", map[string]string{"region": "us-east"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	user := source.NewUser(t, "mapper-east")
	t.Log(strings.TrimSpace(run("mapper-apiserver", "grant", "--location=east", "--user=mapper-east", "--apply", "--kubeconfig="+kc)))
	eastKC := filepath.Join(t.TempDir(), "east.kubeconfig")
	run("mapper-apiserver", "kubeconfig", "--kubeconfig="+user.KubeconfigPath, "--location=east", "-o", eastKC)
	ensureNamespace(t, ctx, src, "shop")
	// "Choose who may use which location": the chart's default is the Bound mode, so shop gets
	// a LocationBinding (every registered location) before its objects reach a view.
	binding := filepath.Join(t.TempDir(), "binding.yaml")
	if err := os.WriteFile(binding, []byte("apiVersion: control.mapper.kcp.io/v1alpha1\nkind: LocationBinding\nmetadata: {name: all, namespace: shop}\nspec: {locationSelector: {}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := framework.RunKubectl(t, kc, "apply", "-f", binding); err != nil {
		t.Fatalf("kubectl apply of shop's LocationBinding: %v\n%s", err, out)
	}
	for _, o := range []*unstructured.Unstructured{newConfigMap("shop", "catalog", "east"), newConfigMap("shop", "local", "west")} {
		if _, err := src.Resource(configMapsGVR).Namespace("shop").Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitForRBAC(t, ctx, source.Admin().Client(t), identity{user: "mapper-east", groups: []string{"system:authenticated"}}, "watch", "east", true)
	out, err := framework.RunKubectl(t, eastKC, "get", "configmaps", "-n", "shop", "-o", "name")
	if err != nil || strings.TrimSpace(out) != "configmap/catalog" {
		t.Fatalf("east's view through the aggregator, as mapper-east: %q, %v; want configmap/catalog alone", out, err)
	}

	// "Install a location's mapper": helm install mapper-east charts/mapper -n cluster-mapper
	// --set-file viewKubeconfig.content=east.kubeconfig, into the target.
	view, err := os.ReadFile(eastKC)
	if err != nil {
		t.Fatal(err)
	}
	const targetNS = "cluster-mapper"
	mobjects := helmInstall(t, ctx, target, charts.Mapper, "mapper-east", targetNS, map[string]any{"viewKubeconfig": map[string]any{"content": string(view)}})
	kubeconfigFile := filepath.Join(t.TempDir(), "kubeconfig")
	vs, err := target.Admin().Client(t).CoreV1().Secrets(targetNS).Get(ctx, "mapper-view-kubeconfig", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's view kubeconfig Secret: %v", err)
	}
	if err := os.WriteFile(kubeconfigFile, vs.Data["kubeconfig"], 0o600); err != nil {
		t.Fatal(err)
	}
	if port, err = framework.FreePort(); err != nil {
		t.Fatal(err)
	}
	targetKC := tokenKubeconfig(t, ctx, target, targetNS, "mapper-east")
	m := framework.StartProcess(t, framework.ProcessSpec{Name: "mapper-east", Path: bins["mapper"], Args: append(
		withoutArgs(containerArgs(t, mobjects, "mapper-east", "mapper"), targetNS, "--view-kubeconfig", "--metrics-bind-address"),
		"--view-kubeconfig="+kubeconfigFile, "--target-kubeconfig="+targetKC, fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port))})

	tgt, err := dynamic.NewForConfig(target.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	mapperEventually(t, ctx, 2*time.Minute, "the assigned ConfigMap lands on the target", func() (bool, string) {
		list, err := tgt.Resource(configMapsGVR).Namespace("shop").List(ctx, metav1.ListOptions{LabelSelector: contract.LocationLabel + "=east"})
		if err != nil || len(list.Items) != 1 || list.Items[0].GetName() != "catalog" {
			return false, fmt.Sprintf("%v %v\n%s", err, list, m.LogTail(20))
		}
		return true, ""
	})
	waitSyncTarget(t, ctx, src, "east", 2*time.Minute, "Ready=True", readyIs(metav1.ConditionTrue, ""))
	t.Log(strings.TrimSpace(run("mapper", "verify", "--view-kubeconfig="+kubeconfigFile, "--target-kubeconfig="+target.AdminKubeconfig())))

	// The deletion protocol with the same RBAC (docs/design.md, "Deletion").
	installedDeletion(t, ctx, src, tgt, "shop", m)
}
