package e2e

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestHarness proves the test control plane: a source and a target kube-apiserver run at once
// (the source with its own etcd, the target on a shared etcd under its own prefix), serve
// client-go and kubectl with the generated credentials, enforce RBAC, publish the aggregation
// configuration, and leave no process behind when stopped.
func TestHarness(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	shared := framework.StartEtcd(t)
	start := time.Now()
	cps := framework.StartControlPlanes(t,
		framework.ControlPlaneOptions{Name: "source"},
		framework.ControlPlaneOptions{Name: "target", Etcd: shared},
	)
	t.Logf("source and target ready in %v", time.Since(start).Round(time.Millisecond))
	source, target := cps[0], cps[1]

	for _, cp := range cps {
		t.Run(cp.Name, func(t *testing.T) {
			client := cp.Admin().Client(t)
			ns := "harness-" + cp.Name
			cmName := "cm-" + cp.Name
			if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating namespace: %v", err)
			}
			want := map[string]string{"cluster": cp.Name}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cmName, Namespace: ns}, Data: want}
			if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating configmap: %v", err)
			}
			got, err := client.CoreV1().ConfigMaps(ns).Get(ctx, cmName, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("reading configmap back: %v", err)
			}
			if got.Data["cluster"] != cp.Name {
				t.Errorf("configmap data = %v, want %v", got.Data, want)
			}

			out, err := framework.RunKubectl(t, cp.AdminKubeconfig(), "get", "configmaps", "-A")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, ns) || !strings.Contains(out, cmName) {
				t.Errorf("kubectl get configmaps -A does not list %s/%s:\n%s", ns, cmName, out)
			}

			// A user without any RBAC permission is authenticated but forbidden.
			nobody := cp.NewUser(t, "nobody")
			_, err = nobody.Client(t).CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
			if !apierrors.IsForbidden(err) {
				t.Errorf("listing configmaps as a user without permissions: got %v, want Forbidden", err)
			}
			if _, err := framework.RunKubectl(t, nobody.KubeconfigPath, "get", "configmaps", "-A"); err == nil || !strings.Contains(err.Error(), "forbidden") {
				t.Errorf("kubectl as a user without permissions: got %v, want a forbidden error", err)
			}

			// A user in a group granted access by a Role may read. (The aggregated default roles
			// such as "view" are empty here: no kube-controller-manager aggregates them.)
			reader := cp.NewUser(t, "reader", "harness:readers")
			role := &rbacv1.Role{
				ObjectMeta: metav1.ObjectMeta{Name: "configmap-reader", Namespace: ns},
				Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
			}
			if _, err := client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating role: %v", err)
			}
			binding := &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "harness-readers", Namespace: ns},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
				Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "harness:readers"}},
			}
			if _, err := client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating binding: %v", err)
			}
			// RBAC sees the new binding through an informer, so allow it a moment.
			readerClient := reader.Client(t)
			var readErr error
			_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				_, readErr = readerClient.CoreV1().ConfigMaps(ns).Get(ctx, cmName, metav1.GetOptions{})
				return readErr == nil, nil
			})
			if readErr != nil {
				t.Errorf("reading the configmap as a user bound to view: %v", readErr)
			}

			// The aggregation layer is configured: kube-apiserver publishes the front-proxy CA for
			// aggregated API servers.
			auth, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("reading extension-apiserver-authentication: %v", err)
			}
			if got := auth.Data["requestheader-client-ca-file"]; !bytes.Contains([]byte(got), bytes.TrimSpace(cp.FrontProxy.CA.CertPEM)) {
				t.Errorf("requestheader-client-ca-file does not hold the front-proxy CA:\n%s", got)
			}
			if got := auth.Data["requestheader-allowed-names"]; !strings.Contains(got, framework.FrontProxyClientName) {
				t.Errorf("requestheader-allowed-names = %s, want it to contain %q", got, framework.FrontProxyClientName)
			}
		})
	}

	// Source and target are separate clusters although the target shares an etcd.
	for _, pair := range [][2]*framework.ControlPlane{{source, target}, {target, source}} {
		from, other := pair[0], pair[1]
		_, err := other.Admin().Client(t).CoreV1().Namespaces().Get(ctx, "harness-"+from.Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("namespace harness-%s on %s: got %v, want NotFound", from.Name, other.Name, err)
		}
	}

	pids := append(append(source.PIDs(), target.PIDs()...), shared.Process.PID)
	start = time.Now()
	for _, stop := range []func() error{target.Stop, source.Stop, shared.Stop} {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}
	t.Logf("stopped pids %v in %v", pids, time.Since(start).Round(time.Millisecond))
	framework.AssertStopped(t, pids...)
}
