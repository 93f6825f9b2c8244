package framework

import (
	"context"
	"os"
	"path/filepath"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
)

// InstallControlCRDs applies artifacts/crds (the CRDs of control.mapper.kcp.io, docs/design.md, "The
// control plane objects") to cp with kubectl and waits until SyncTargets are served (at most a
// minute); it fails t otherwise.
func InstallControlCRDs(t TB, ctx context.Context, cp *ControlPlane) {
	t.Helper()
	installCRDs(t, ctx, cp, "crds", synctarget.Resource)
}

// InstallControlCRD applies the one CRD of artifacts/crds that defines resource (a resource of
// control.mapper.kcp.io, e.g. customizations) to cp with kubectl and waits until it is served
// (at most a minute); it fails t otherwise. A test installs one CRD where another would be in
// its way (kcpproxy serves no cluster-scoped resource such as SyncTargets).
func InstallControlCRD(t TB, ctx context.Context, cp *ControlPlane, resource schema.GroupVersionResource) {
	t.Helper()
	installCRDs(t, ctx, cp, filepath.Join("crds", resource.Group+"_"+resource.Resource+".yaml"), resource)
}

// installCRDs applies artifacts/<path> (a file or a directory) to cp and waits until served
// is listed without error.
func installCRDs(t TB, ctx context.Context, cp *ControlPlane, path string, served schema.GroupVersionResource) {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := RunKubectl(t, cp.AdminKubeconfig(), "apply", "--server-side", "-f", filepath.Join(root, "artifacts", path)); err != nil {
		t.Fatalf("kubectl apply -f artifacts/%s: %v\n%s", path, err, out)
	}
	dyn, err := dynamic.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(served).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("%s not served after installing artifacts/%s: %v", served.GroupResource(), path, err)
	}
}

// LogDirEnv names an environment variable: a directory that keeps the logs of the mappers and
// mapper-controller the tests start (by default they go to the test's temporary directory and
// are removed with it).
const LogDirEnv = "MAPPER_E2E_LOGDIR"

// StartMapperController builds cmd/mapper-controller and runs it against cp's source with the
// admin's kubeconfig, leader election on, no metrics endpoint, the location grace period grace
// and extraArgs; its log is kept in $MAPPER_E2E_LOGDIR when set (LogDirEnv). It returns once the controller leads (its leader election Lease
// cluster-mapper-system/mapper-controller has a holder; at most a minute). It creates the
// namespace cluster-mapper-system when it is missing. Like StartMapperAPIServer it runs with
// --location-access=Open unless extraArgs say "--location-access=Bound".
func StartMapperController(t TB, ctx context.Context, cp *ControlPlane, grace time.Duration, extraArgs ...string) *Process {
	t.Helper()
	EnsureNamespace(t, ctx, cp, contract.ControlNamespace)
	bin := BuildBinary(t, "./cmd/mapper-controller")
	p := StartProcess(t, ProcessSpec{Name: "mapper-controller", Path: bin, LogDir: os.Getenv(LogDirEnv), Args: append([]string{
		"--kubeconfig=" + cp.AdminKubeconfig(), "--location-grace-period=" + grace.String(),
		"--bind-address=0", "--leader-elect=true", "--location-access=Open", "-v=2",
	}, extraArgs...)})
	kube := cp.Admin().Client(t)
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var l *coordinationv1.Lease
		l, last = kube.CoordinationV1().Leases(contract.ControlNamespace).Get(ctx, "mapper-controller", metav1.GetOptions{})
		return last == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
	})
	if err != nil {
		t.Fatalf("mapper-controller did not become the leader: %v (last: %v)\n%s", err, last, p.LogTail(logTailLines))
	}
	return p
}

// StartMapperControllerUnelected builds cmd/mapper-controller and runs it with the source
// kubeconfig kubeconfig, without leader election and without metrics endpoint, and extraArgs
// (--controllers, --source-mode ...), for a source where it cannot hold a Lease: a kcp
// source's wildcard endpoint serves no writes. Its log is kept as StartMapperController's.
func StartMapperControllerUnelected(t TB, kubeconfig string, extraArgs ...string) *Process {
	t.Helper()
	bin := BuildBinary(t, "./cmd/mapper-controller")
	return StartProcess(t, ProcessSpec{Name: "mapper-controller", Path: bin, LogDir: os.Getenv(LogDirEnv), Args: append([]string{
		"--kubeconfig=" + kubeconfig, "--bind-address=0", "--leader-elect=false", "-v=2",
	}, extraArgs...)})
}

// MapperAPIServerArgs returns the mapper-controller flag that reaches m's mapper.kcp.io API
// (`locations` and the views) directly, as the admin of the control plane m mirrors:
// --mapper-apiserver-kubeconfig. The tests start mapper-apiserver without registering it with
// an aggregator, so the source's server does not serve the group.
func MapperAPIServerArgs(t TB, m *MapperAPIServer) []string {
	t.Helper()
	return []string{"--mapper-apiserver-kubeconfig=" + m.Source.Admin().KubeconfigFor(t, m.URL, m.ServingCA.CertPEM)}
}

// EnsureNamespace creates the namespace name in cp unless it exists.
func EnsureNamespace(t TB, ctx context.Context, cp *ControlPlane, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cp.Admin().Client(t).CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}
