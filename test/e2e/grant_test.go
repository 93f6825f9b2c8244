package e2e

import (
	"context"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-mapper/cluster-mapper/pkg/apiserver"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestGrantAddsSubjects runs `mapper-apiserver grant --apply` against a real kube-apiserver:
// granting a location to a second identity adds it to the location's bindings and keeps the
// first (as `kubectl auth reconcile` does; a pull mapper's user and a push-mode
// mapper-controller can share a location), re-running it changes nothing, and
// --remove-extra-subjects leaves exactly the named subjects.
func TestGrantAddsSubjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source"})
	bin := framework.BuildBinary(t, "./cmd/mapper-apiserver")
	grant := func(args ...string) {
		t.Helper()
		out, err := exec.CommandContext(ctx, bin, append([]string{"grant", "--location=east", "--apply", "--kubeconfig=" + cp.AdminKubeconfig()}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("mapper-apiserver grant %v: %v\n%s", args, err, out)
		}
	}
	kube := cp.Admin().Client(t)
	subjects := func() (cluster, lease string) {
		t.Helper()
		crb, err := kube.RbacV1().ClusterRoleBindings().Get(ctx, apiserver.GrantName("east"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rb, err := kube.RbacV1().RoleBindings(apiserver.LeaseNamespace).Get(ctx, apiserver.GrantName("east"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return subjectNames(crb.Subjects), subjectNames(rb.Subjects)
	}
	want := func(step, names string) {
		t.Helper()
		if c, l := subjects(); c != names || l != names {
			t.Errorf("%s: ClusterRoleBinding subjects %q, RoleBinding subjects %q, want %q in both", step, c, l, names)
		}
	}

	grant("--user=mapper-east")
	want("first grant", "User/mapper-east")
	grant("--service-account=cluster-mapper-system/mapper-controller")
	want("second identity", "ServiceAccount/cluster-mapper-system/mapper-controller User/mapper-east")
	grant("--user=mapper-east")
	want("re-run", "ServiceAccount/cluster-mapper-system/mapper-controller User/mapper-east")
	grant("--user=mapper-east-2", "--remove-extra-subjects")
	want("--remove-extra-subjects", "User/mapper-east-2")
}

// subjectNames renders subjects as sorted "Kind/[namespace/]name" words.
func subjectNames(subjects []rbacv1.Subject) string {
	var out []string
	for _, s := range subjects {
		name := s.Kind + "/" + s.Name
		if s.Namespace != "" {
			name = s.Kind + "/" + s.Namespace + "/" + s.Name
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
