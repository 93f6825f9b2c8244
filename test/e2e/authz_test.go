package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// authzNamespace holds the objects of TestAuthorization.
const authzNamespace = "authz"

// authzEnv is a source kube-apiserver with mapper-apiserver registered with its aggregator, test
// data assigned to east and west, and identities with different grants.
type authzEnv struct {
	source *framework.ControlPlane
	api    *framework.APIService
	admin  kubernetes.Interface
	src    dynamic.Interface
	routes []route

	eastUser, nobody, getOnly, watchOnly *framework.User
	// eastToken is a ServiceAccount token bound to the same grant as eastUser.
	eastToken string
}

func startAuthzEnv(t *testing.T, ctx context.Context) *authzEnv {
	t.Helper()
	source := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source"})
	env := &authzEnv{source: source, admin: source.Admin().Client(t)}
	var err error
	if env.src, err = dynamic.NewForConfig(source.AdminConfig()); err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, ctx, env.src, authzNamespace)
	for name, locs := range map[string][]string{"east-only": {"east"}, "west-only": {"west"}, "both": {"east", "west"}, "none": nil} {
		if _, err := env.src.Resource(configMapsGVR).Namespace(authzNamespace).Create(ctx, newConfigMap(authzNamespace, name, locs...), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, locs := range map[string][]string{"east-app": {"east"}, "west-app": {"west"}, "both-app": {"east", "west"}} {
		if _, err := env.src.Resource(deploymentsGVR).Namespace(authzNamespace).Create(ctx, newDeployment(authzNamespace, name, locs...), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Identities. RBAC is in place (and seen by kube-apiserver's RBAC informer) before
	// mapper-apiserver is asked anything, so that no stale denial is cached.
	env.eastUser = source.NewUser(t, "mapper-east")
	env.nobody = source.NewUser(t, "nobody")
	env.getOnly = source.NewUser(t, "get-only")
	env.watchOnly = source.NewUser(t, "watch-only")
	env.eastToken = serviceAccountToken(t, ctx, env.admin, "default", "mapper-east")
	grant(t, ctx, env.admin, "mapper-location-east", []rbacv1.PolicyRule{viewRule("east", "get", "watch", "update", "patch")},
		userSubject(env.eastUser.Name), serviceAccountSubject("default", "mapper-east"))
	grant(t, ctx, env.admin, "east-get-only", []rbacv1.PolicyRule{viewRule("east", "get")}, userSubject(env.getOnly.Name))
	grant(t, ctx, env.admin, "east-watch-only", []rbacv1.PolicyRule{viewRule("east", "watch")}, userSubject(env.watchOnly.Name))
	for _, c := range []struct {
		who     identity
		verb    string
		allowed bool
	}{
		{identity{user: env.eastUser.Name}, "watch", true},
		{serviceAccountIdentity("default", "mapper-east"), "watch", true},
		{identity{user: env.getOnly.Name}, "get", true},
		{identity{user: env.watchOnly.Name}, "watch", true},
	} {
		waitForRBAC(t, ctx, env.admin, c.who, c.verb, "east", c.allowed)
	}

	env.api = framework.StartAggregatedMapperAPIServer(t, source, "--resources=configmaps,deployments.apps")
	env.routes = []route{
		{name: "aggregated", base: source.URL, caData: source.ServingCABundle()},
		{name: "direct", base: env.api.Server.URL, caData: env.api.Server.ServingCA.CertPEM},
	}
	return env
}

// TestAuthorization proves per-location authorization end to end: a real kube-apiserver with
// its aggregator, mapper-apiserver registered through an APIService, RBAC decided by the
// kube-apiserver through delegated SubjectAccessReviews, and the same answers whether a client
// goes through the aggregator or straight to mapper-apiserver.
func TestAuthorization(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := startAuthzEnv(t, ctx)

	for _, r := range env.routes {
		t.Run(r.name, func(t *testing.T) {
			t.Run("east mapper with a client certificate", func(t *testing.T) {
				testEastMapper(t, ctx, env, r, certificate(env.eastUser), "cert")
			})
			t.Run("east mapper with a ServiceAccount token", func(t *testing.T) {
				testEastMapper(t, ctx, env, r, bearer(env.eastToken), "token")
			})
			t.Run("no binding", func(t *testing.T) { testNoBinding(t, ctx, env, r) })
			t.Run("get without watch", func(t *testing.T) { testGetOnly(t, ctx, env, r) })
			t.Run("watch without get", func(t *testing.T) { testWatchOnly(t, ctx, env, r) })
			t.Run("status write needs update", func(t *testing.T) { testStatusWriteAuthz(t, ctx, env, r) })
		})
	}
	t.Run("anonymous", func(t *testing.T) { testAnonymous(t, ctx, env) })
	t.Run("kubectl through the aggregator", func(t *testing.T) { testKubectlAggregated(t, ctx, env) })
}

// testEastMapper: a user bound to east lists and watches east's view, gets 404 for a west-only
// object through it, and 403 on west's view.
func testEastMapper(t *testing.T, ctx context.Context, env *authzEnv, r route, creds credentials, tag string) {
	east := r.view(t, creds, "east").Resource(configMapsGVR).Namespace(authzNamespace)
	list, err := east.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing east's view: %v", err)
	}
	if want, got := groundTruth(t, ctx, env.src, configMapsGVR, "east", authzNamespace), keysOf(list.Items); !want.Equal(got) {
		t.Errorf("east's view: %s", diff(want, got))
	}
	if _, err := east.Get(ctx, "east-only", metav1.GetOptions{}); err != nil {
		t.Errorf("GET of an east object through east's view: %v", err)
	}
	if _, err := east.Get(ctx, "west-only", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("GET of a west-only object through east's view: want 404, got %v", err)
	}

	west := r.view(t, creds, "west").Resource(configMapsGVR).Namespace(authzNamespace)
	_, err = west.List(ctx, metav1.ListOptions{})
	expectForbidden(t, "list of west's view", err, `"west"`, "locations/proxy", "cannot get", r.hint("get"))
	_, err = west.Get(ctx, "west-only", metav1.GetOptions{})
	expectForbidden(t, "GET through west's view", err, `"west"`)
	_, err = west.Watch(ctx, metav1.ListOptions{})
	expectForbidden(t, "watch of west's view", err, `"west"`)

	// A watch on east's view sees an east object created after it started, and not a west one
	// created just before.
	w, err := east.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatalf("watching east's view: %v", err)
	}
	defer w.Stop()
	westName, eastName := fmt.Sprintf("watch-%s-%s-west", r.name, tag), fmt.Sprintf("watch-%s-%s-east", r.name, tag)
	for name, loc := range map[string]string{westName: "west", eastName: "east"} {
		if _, err := env.src.Resource(configMapsGVR).Namespace(authzNamespace).Create(ctx, newConfigMap(authzNamespace, name, loc), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	timeout := time.After(30 * time.Second)
	for seen := false; !seen; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch of east's view closed before the east object arrived")
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error: %v", apierrors.FromObject(ev.Object))
			}
			name := ev.Object.(*unstructured.Unstructured).GetName()
			if name == westName {
				t.Fatalf("east's watch received the west-only object %s", name)
			}
			seen = ev.Type == watch.Added && name == eastName
		case <-timeout:
			t.Fatalf("east's watch did not deliver %s within 30s", eastName)
		}
	}
}

// testNoBinding: a user without any grant gets 403 everywhere: both views, a GET of an object
// (not 404: it cannot even probe), watches, and the locations resource.
func testNoBinding(t *testing.T, ctx context.Context, env *authzEnv, r route) {
	creds := certificate(env.nobody)
	for _, loc := range []string{"east", "west"} {
		v := r.view(t, creds, loc).Resource(configMapsGVR).Namespace(authzNamespace)
		_, err := v.List(ctx, metav1.ListOptions{})
		expectForbidden(t, "list of "+loc, err, `"`+loc+`"`, "nobody", "locations/proxy")
		_, err = v.Get(ctx, loc+"-only", metav1.GetOptions{})
		expectForbidden(t, "GET through "+loc, err, `"`+loc+`"`)
		_, err = v.Watch(ctx, metav1.ListOptions{})
		expectForbidden(t, "watch of "+loc, err, `"`+loc+`"`)
		// Discovery inside the view is a read of the view, too.
		_, err = r.view(t, creds, loc).Resource(configMapsGVR).List(ctx, metav1.ListOptions{Limit: 1})
		expectForbidden(t, "list across namespaces of "+loc, err)
	}
	_, err := r.root(t, creds).Resource(locationsGVR).List(ctx, metav1.ListOptions{})
	expectForbidden(t, "list of locations", err, "locations")
}

// testGetOnly: "get" alone reads but does not watch, on both routes (the aggregator checks only
// "get"; mapper-apiserver adds "watch" for watches).
func testGetOnly(t *testing.T, ctx context.Context, env *authzEnv, r route) {
	east := r.view(t, certificate(env.getOnly), "east").Resource(configMapsGVR).Namespace(authzNamespace)
	if _, err := east.List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list with get: %v", err)
	}
	if _, err := east.Get(ctx, "east-only", metav1.GetOptions{}); err != nil {
		t.Errorf("GET with get: %v", err)
	}
	_, err := east.Watch(ctx, metav1.ListOptions{})
	expectForbidden(t, "watch with get only", err, `"east"`, "cannot watch", `verbs ["watch"]`)
	// The legacy /watch/ path prefix is a watch as well.
	res := rawGet(t, ctx, certificate(env.getOnly)(r.viewURL("east")+"/api/v1/watch/namespaces/"+authzNamespace+"/configmaps", r.caData))
	if res.code != http.StatusForbidden || !strings.Contains(res.body, "cannot watch") {
		t.Errorf("legacy /watch/ path with get only: want 403 naming watch, got %d %s", res.code, res.body)
	}
}

// testWatchOnly: "watch" alone grants nothing, on both routes.
func testWatchOnly(t *testing.T, ctx context.Context, env *authzEnv, r route) {
	east := r.view(t, certificate(env.watchOnly), "east").Resource(configMapsGVR).Namespace(authzNamespace)
	_, err := east.List(ctx, metav1.ListOptions{})
	expectForbidden(t, "list with watch only", err, `"east"`, "cannot get")
	_, err = east.Watch(ctx, metav1.ListOptions{})
	expectForbidden(t, "watch with watch only", err, `"east"`, "cannot get")
}

// testStatusWriteAuthz: a status write through a view is authorized as "update" (PUT) or "patch"
// (PATCH) of locations/proxy. Whether the write then succeeds is the view's business; here only
// the authorization is checked.
func testStatusWriteAuthz(t *testing.T, ctx context.Context, env *authzEnv, r route) {
	body := []byte(`{"status":{"observedGeneration":1}}`)
	_, err := r.view(t, certificate(env.getOnly), "east").Resource(deploymentsGVR).Namespace(authzNamespace).
		Patch(ctx, "east-app", types.MergePatchType, body, metav1.PatchOptions{}, "status")
	expectForbidden(t, "status patch with get only", err, `"east"`, "cannot patch", r.hint("patch"))
	obj, err := env.src.Resource(deploymentsGVR).Namespace(authzNamespace).Get(ctx, "east-app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.view(t, certificate(env.getOnly), "east").Resource(deploymentsGVR).Namespace(authzNamespace).UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	expectForbidden(t, "status update with get only", err, `"east"`, "cannot update", r.hint("update"))
	_, err = r.view(t, certificate(env.eastUser), "east").Resource(deploymentsGVR).Namespace(authzNamespace).
		Patch(ctx, "east-app", types.MergePatchType, body, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}, "status")
	if apierrors.IsForbidden(err) {
		t.Errorf("status patch by the east mapper, which may patch: %v", err)
	}
}

// testAnonymous: no anonymous access to views or locations, even when RBAC grants
// system:unauthenticated; health endpoints stay open.
func testAnonymous(t *testing.T, ctx context.Context, env *authzEnv) {
	direct, aggregated := env.routes[1], env.routes[0]
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		if res := rawGet(t, ctx, anonymous(direct.base+p, direct.caData)); res.code != http.StatusOK {
			t.Errorf("anonymous %s: want 200, got %d %s", p, res.code, res.body)
		}
	}
	check := func(t *testing.T, why string) {
		for _, u := range []string{direct.viewURL("east") + "/api/v1/configmaps", direct.groupURL() + "/locations", direct.groupURL(), "/apis/mapper.kcp.io"} {
			if strings.HasPrefix(u, "/") {
				u = direct.base + u
			}
			res := rawGet(t, ctx, anonymous(u, direct.caData))
			if res.code != http.StatusForbidden || !strings.Contains(res.body, "anonymous requests may not") {
				t.Errorf("anonymous GET %s (%s): want 403 refusing anonymous requests, got %d %s", u, why, res.code, res.body)
			}
		}
		res := rawGet(t, ctx, anonymous(aggregated.viewURL("east")+"/api/v1/configmaps", aggregated.caData))
		if res.code != http.StatusForbidden {
			t.Errorf("anonymous GET through the aggregator (%s): want 403, got %d %s", why, res.code, res.body)
		}
	}
	// Even a cluster that grants system:unauthenticated the view does not open it: the
	// aggregator lets the request through, mapper-apiserver refuses it. (This runs first, so
	// that no denial for anonymous is in any cache yet.)
	grant(t, ctx, env.admin, "anonymous-east", []rbacv1.PolicyRule{
		viewRule("east", "get", "watch"),
		{APIGroups: []string{mapperGroup}, Resources: []string{"locations"}, Verbs: []string{"get", "list", "watch"}},
		{NonResourceURLs: []string{"/apis/mapper.kcp.io", "/apis/mapper.kcp.io/*"}, Verbs: []string{"get"}},
	}, groupSubject("system:unauthenticated"))
	anon := identity{user: "system:anonymous", groups: []string{"system:unauthenticated"}}
	waitForRBAC(t, ctx, env.admin, anon, "get", "east", true)
	check(t, "RBAC grants system:unauthenticated")
	res := rawGet(t, ctx, anonymous(aggregated.viewURL("east")+"/api/v1/configmaps", aggregated.caData))
	if !strings.Contains(res.body, "anonymous requests may not") {
		t.Errorf("anonymous GET through the aggregator with RBAC for anonymous: want mapper-apiserver's refusal, got %d %s", res.code, res.body)
	}

	for _, err := range []error{
		env.admin.RbacV1().ClusterRoleBindings().Delete(ctx, "anonymous-east", metav1.DeleteOptions{}),
		env.admin.RbacV1().ClusterRoles().Delete(ctx, "anonymous-east", metav1.DeleteOptions{}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	waitForRBAC(t, ctx, env.admin, anon, "get", "east", false)
	check(t, "no RBAC for anonymous")
}

// testKubectlAggregated: the built kubectl through the aggregator, `kubectl get locations`, and
// the kubeconfig printed by `mapper-apiserver kubeconfig`.
func testKubectlAggregated(t *testing.T, ctx context.Context, env *authzEnv) {
	// east and west have no SyncTarget: listed only on request (docs/locations.md).
	out, err := framework.RunKubectl(t, env.source.AdminKubeconfig(), "get", "locations", "--field-selector", "status.registered=false")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NAME", "east", "west"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get locations through the aggregator lacks %q:\n%s", want, out)
		}
	}

	bin := framework.BuildBinary(t, "./cmd/mapper-apiserver")
	kubeconfigFor := func(location string) string {
		path := filepath.Join(t.TempDir(), location+".kubeconfig")
		cmd := exec.CommandContext(ctx, bin, "kubeconfig", "--kubeconfig="+env.eastUser.KubeconfigPath, "--location="+location, "--output="+path)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("mapper-apiserver kubeconfig --location=%s: %v\n%s", location, err, b)
		}
		return path
	}
	east := kubeconfigFor("east")
	b, err := os.ReadFile(east)
	if err != nil {
		t.Fatal(err)
	}
	if want := env.source.URL + "/apis/mapper.kcp.io/v1alpha1/locations/east/proxy"; !strings.Contains(string(b), "server: "+want) {
		t.Errorf("the helper's kubeconfig does not name the aggregated view URL %s:\n%s", want, b)
	}

	out, err = framework.RunKubectl(t, east, "get", "deployments", "-A", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	got := sets.New[string]()
	for _, line := range strings.Fields(out) {
		got.Insert(authzNamespace + "/" + strings.TrimPrefix(line, "deployment.apps/"))
	}
	if want := groundTruth(t, ctx, env.src, deploymentsGVR, "east", ""); !want.Equal(got) {
		t.Errorf("kubectl get deployments -A with the helper's kubeconfig: %s", diff(want, got))
	}
	out, err = framework.RunKubectl(t, east, "get", "deployments", "-A")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "NAMESPACE") || !strings.Contains(out, "east-app") || strings.Contains(out, "west-app") {
		t.Errorf("kubectl get deployments -A through the aggregated east view:\n%s", out)
	}

	// The same user's kubeconfig for west is refused (kube-apiserver's 403 for kubectl's
	// discovery request; kubectl prints it as "Forbidden: unknown").
	_, err = framework.RunKubectl(t, kubeconfigFor("west"), "get", "deployments", "-A")
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "forbidden") {
		t.Errorf("kubectl get deployments -A on west's view as the east mapper: want forbidden, got %v", err)
	}
}

// rawResult is the status code and body of a plain HTTP request.
type rawResult struct {
	code int
	body string
}

// rawGet sends GET cfg.Host with cfg's credentials, for paths the typed clients do not reach.
func rawGet(t *testing.T, ctx context.Context, cfg *rest.Config) rawResult {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, cfg.Host, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", cfg.Host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return rawResult{code: resp.StatusCode, body: string(b)}
}
