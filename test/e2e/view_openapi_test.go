package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestViewOpenAPIWithKubectl: a view serves the source's OpenAPI (v2 and v3) for the resources
// it serves, so kubectl works against a view, straight and through the aggregator, as against
// kube-apiserver:
//   - `kubectl explain` (OpenAPI v3, and v2 with --output=plaintext-openapiv2) prints what it
//     prints against the source; a resource the view does not mirror is unknown there;
//   - `kubectl replace --subresource=status --validate=warn` of a status with an unknown field
//     succeeds with the warning kube-apiserver gives for the same write (kubectl asks the view's
//     OpenAPI whether the server validates fields, and the view passes on the source's
//     warning), and --validate=strict refuses it in the same words.
//
// Fails before viewOpenAPI: kubectl failed with "failed to download openapi: the server could
// not find the requested resource".
func TestViewOpenAPIWithKubectl(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	source := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source"})
	src := dynamicClientFor(t, source)
	ensureNamespace(t, ctx, src, "apps")
	if _, err := src.Resource(deploymentsGVR).Namespace("apps").Create(ctx, reflectStatus(newDeployment("apps", "web", "east")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Resource(deploymentsGVR).Namespace("apps").Create(ctx, reflectStatus(newDeployment("apps", "twin")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	api := framework.StartAggregatedMapperAPIServer(t, source, "--resources=configmaps,deployments.apps")
	direct := source.AdminKubeconfig()
	views := map[string]string{
		"straight":   source.Admin().KubeconfigFor(t, api.Server.ViewURL("east"), api.Server.ServingCA.CertPEM),
		"aggregator": source.Admin().KubeconfigFor(t, api.ViewURL("east"), source.ServingCABundle()),
	}
	names := make([]string, 0, len(views))
	for n := range views {
		names = append(names, n)
	}
	sort.Strings(names)
	kubectl := func(kubeconfig string, args ...string) (string, string, error) {
		// A cache of its own per run: kubectl keeps discovery and OpenAPI per server URL.
		return framework.RunKubectlWithStderr(t, kubeconfig, append([]string{"--cache-dir=" + t.TempDir()}, args...)...)
	}

	for _, args := range [][]string{
		{"explain", "deployments.spec.replicas"},
		{"explain", "deployments.status", "--recursive"},
		{"explain", "configmaps.data"},
		{"explain", "--output=plaintext-openapiv2", "deployments.spec.replicas"},
	} {
		want, _, err := kubectl(direct, args...)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			got, _, err := kubectl(views[n], args...)
			if err != nil {
				t.Errorf("%s: %v", n, err)
				continue
			}
			if got != want {
				t.Errorf("%s: kubectl %s prints\n%s\nagainst the view, and against kube-apiserver\n%s", n, strings.Join(args, " "), got, want)
			}
		}
	}
	for _, n := range names {
		if _, _, err := kubectl(views[n], "explain", "statefulsets"); err == nil || !strings.Contains(err.Error(), "statefulsets") {
			t.Errorf("%s: kubectl explain of a resource the view does not mirror: %v, want an error naming it", n, err)
		}
	}

	// A status with an unknown field, written with kubectl replace --subresource=status.
	withBogusStatus := func(kubeconfig, name string) string {
		out, _, err := kubectl(kubeconfig, "get", "deployment", name, "-n", "apps", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal([]byte(out), u); err != nil {
			t.Fatal(err)
		}
		u.Object["status"] = map[string]interface{}{"replicas": int64(1), "bogusField": "x"}
		raw, err := json.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), name+".json")
		if err := os.WriteFile(f, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	warnings := func(stderr string) []string {
		var out []string
		for _, l := range strings.Split(stderr, "\n") {
			if strings.HasPrefix(l, "Warning:") {
				out = append(out, l)
			}
		}
		return out
	}
	_, stderr, err := kubectl(direct, "replace", "--subresource=status", "--validate=warn", "-f", withBogusStatus(direct, "twin"))
	if err != nil {
		t.Fatal(err)
	}
	wantWarnings := warnings(stderr)
	_, _, wantStrict := kubectl(direct, "replace", "--subresource=status", "--validate=strict", "-f", withBogusStatus(direct, "twin"))
	t.Logf("kube-apiserver: --validate=warn warns %q; --validate=strict: %v", wantWarnings, wantStrict)
	if len(wantWarnings) == 0 || wantStrict == nil {
		t.Fatalf("kube-apiserver neither warned of nor refused the unknown field")
	}
	for _, n := range names {
		_, stderr, err := kubectl(views[n], "replace", "--subresource=status", "--validate=warn", "-f", withBogusStatus(views[n], "web"))
		if err != nil {
			t.Errorf("%s: kubectl replace --subresource=status --validate=warn: %v", n, err)
		} else if got := warnings(stderr); strings.Join(got, "\n") != strings.Join(wantWarnings, "\n") {
			t.Errorf("%s: --validate=warn warns %q, kube-apiserver %q", n, got, wantWarnings)
		}
		_, _, err = kubectl(views[n], "replace", "--subresource=status", "--validate=strict", "-f", withBogusStatus(views[n], "web"))
		if err == nil || !strings.Contains(err.Error(), `unknown field "status.bogusField"`) {
			t.Errorf("%s: --validate=strict: %v, want the refusal kube-apiserver gives (%v)", n, err, wantStrict)
		}
	}
}
