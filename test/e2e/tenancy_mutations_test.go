package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// startTenant makes namespace ns a tenant's (docs/design.md, "The control plane objects":
// tenancy): a ServiceAccount ns/tenant with a Role in ns only (ConfigMaps, Secrets,
// Deployments, Placements, Customizations, StatusCollectors), and returns a dynamic client
// with its token.
func startTenant(t *testing.T, ctx context.Context, env *locationsEnv, ns string) dynamic.Interface {
	t.Helper()
	ensureNamespace(t, ctx, env.src, ns)
	kube := env.source.Admin().Client(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"*"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"*"}},
		{APIGroups: []string{controlv1alpha1.SchemeGroupVersion.Group}, Resources: []string{"placements", "customizations", "statuscollectors"}, Verbs: []string{"*"}},
	}}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
		Subjects: []rbacv1.Subject{serviceAccountSubject(ns, "tenant")}}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: env.source.URL, BearerToken: serviceAccountToken(t, ctx, kube, ns, "tenant"), QPS: -1,
		TLSClientConfig: rest.TLSClientConfig{CAData: env.source.ServingCABundle()}}
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// RBAC learns the binding through an informer: wait until the tenant may list its ConfigMaps.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := d.Resource(configMapsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("tenant %s never got its Role", ns)
	}
	return d
}

// tenantConfigMap is a ConfigMap ns/name assigned to east with data owner=owner, the labels and
// the spec-diff.kcp.io/east patch given ("" for none).
func tenantConfigMap(ns, name, owner, eastPatch string, labels map[string]string) *unstructured.Unstructured {
	u := newConfigMap(ns, name, "east")
	u.Object["data"] = map[string]interface{}{"owner": owner}
	if eastPatch != "" {
		ann := u.GetAnnotations()
		ann[contract.SpecDiffAnnotation("east")] = eastPatch
		u.SetAnnotations(ann)
	}
	u.SetLabels(labels)
	return u
}

// hostileCustomization is a Customization tenant-a/name selecting tenant-a's ConfigMaps
// labelled via=name, with mutation.
func hostileCustomization(name string, mutation map[string]interface{}) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": controlv1alpha1.SchemeGroupVersion.String(), "kind": "Customization",
		"metadata": map[string]interface{}{"name": name, "namespace": "tenant-a"},
		"spec": map[string]interface{}{
			"resources":      []interface{}{map[string]interface{}{"apiGroups": []interface{}{""}, "apiVersions": []interface{}{"v1"}, "resources": []interface{}{"configmaps"}}},
			"objectSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"via": name}},
			"mutations":      []interface{}{mutation},
		},
	}}
}

// TestTenantMutationsCannotMoveObjects (docs/customization.md, "What a
// rendering may not change"): two tenants, ServiceAccounts with a Role in their own
// namespace only. Tenant A's spec-diff.kcp.io/east patches and Customizations that replace,
// add or move /metadata (into tenant B's namespace, under the name of B's object, or into
// kube-system), or change a kcp.io label, are refused on real servers:
//   - east's view withholds A's objects (a GET answers 503 saying why) and never shows them
//     under another namespace or name;
//   - on the target, B's copy keeps its content and its kcp.io/source-uid, nothing lands in
//     kube-system, and A's objects land nowhere; `mapper verify` reports nothing wrong;
//   - the refusal is reported: Warning Events ProtectedFieldChanged on A's objects, and the
//     failing objects, with that reason, in the status of A's Customizations.
//
// A's harmless patch is applied meanwhile, so the pipeline is shown to work.
func TestTenantMutationsCannotMoveObjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := startLocationsEnv(t, ctx, "east")
	a := startTenant(t, ctx, env, "tenant-a")
	b := startTenant(t, ctx, env, "tenant-b")
	// mapper-controller writes the status of Customizations from what `locations` reports.
	framework.StartMapperController(t, ctx, env.source, time.Minute, "--controllers=customizationstatus")
	env.startMapper(t, "mapper-east", "east", nil, locationMapperArgs...)

	if _, err := b.Resource(configMapsGVR).Namespace("tenant-b").Create(ctx, tenantConfigMap("tenant-b", "victim", "b", "", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var victim *unstructured.Unstructured
	mapperEventually(t, ctx, 90*time.Second, "tenant B's copy on east", func() (bool, string) {
		victim = env.targetObject(t, ctx, "east", configMapsGVR, "tenant-b", "victim")
		return victim != nil, "absent"
	})
	victimSourceUID := victim.GetAnnotations()[contract.SourceUIDAnnotation]

	toVictim := `{"name":"victim","namespace":"tenant-b"}`
	patches := map[string]string{
		"replace":     `[{"op":"replace","path":"/metadata","value":` + toVictim + `}]`,
		"add":         `[{"op":"add","path":"/metadata","value":` + toVictim + `}]`,
		"move":        `[{"op":"add","path":"/data/m","value":` + toVictim + `},{"op":"move","from":"/data/m","path":"/metadata"}]`,
		"kube-system": `[{"op":"replace","path":"/metadata","value":{"name":"planted","namespace":"kube-system"}}]`,
		"label":       `[{"op":"add","path":"/metadata/labels/kcp.io~1location","value":"west"}]`,
	}
	for name, p := range patches {
		if _, err := a.Resource(configMapsGVR).Namespace("tenant-a").Create(ctx, tenantConfigMap("tenant-a", "by-"+name, "a", p, map[string]string{"app": "x"}), metav1.CreateOptions{}); err != nil {
			t.Fatalf("tenant A creating by-%s: %v", name, err)
		}
	}
	mutations := map[string]map[string]interface{}{
		"json-replace": {"patchType": "JSONPatch", "jsonPatch": map[string]interface{}{
			"expression": `[JSONPatch{op: "replace", path: "/metadata", value: Object.metadata{name: "victim", namespace: "tenant-b"}}]`}},
		"json-add": {"patchType": "JSONPatch", "jsonPatch": map[string]interface{}{
			"expression": `[JSONPatch{op: "add", path: "/metadata", value: Object.metadata{name: "victim", namespace: "tenant-b", uid: object.metadata.uid}}]`}},
		"apply-namespace": {"patchType": "ApplyConfiguration", "applyConfiguration": map[string]interface{}{
			"expression": `Object{metadata: Object.metadata{namespace: "tenant-b"}}`}},
	}
	custs := a.Resource(customization.Resource).Namespace("tenant-a")
	for name, m := range mutations {
		if _, err := custs.Create(ctx, hostileCustomization(name, m), metav1.CreateOptions{}); err != nil {
			t.Fatalf("tenant A creating Customization %s: %v", name, err)
		}
	}
	// Once mapper-apiserver describes them, the Customizations are in force: the objects they
	// select never render. (An object that rendered before keeps that rendering instead.) They
	// select nothing yet: the objects they select come next.
	for name := range mutations {
		waitCustomizationCondition(t, ctx, custs, name, controlv1alpha1.CustomizationReady, "True", controlv1alpha1.ReasonNoObjectsSelected)
	}
	for name := range mutations {
		if _, err := a.Resource(configMapsGVR).Namespace("tenant-a").Create(ctx, tenantConfigMap("tenant-a", "via-"+name, "a", "", map[string]string{"via": name}), metav1.CreateOptions{}); err != nil {
			t.Fatalf("tenant A creating via-%s: %v", name, err)
		}
	}
	fine := `[{"op":"replace","path":"/data/owner","value":"patched"}]`
	if _, err := a.Resource(configMapsGVR).Namespace("tenant-a").Create(ctx, tenantConfigMap("tenant-a", "fine", "a", fine, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mapperEventually(t, ctx, 90*time.Second, "tenant A's harmless patch on east", func() (bool, string) {
		u := env.targetObject(t, ctx, "east", configMapsGVR, "tenant-a", "fine")
		if u == nil {
			return false, "absent"
		}
		owner, _, _ := unstructured.NestedString(u.Object, "data", "owner")
		return owner == "patched", fmt.Sprintf("owner %q", owner)
	})
	env.converge(t, ctx, "tenant A's hostile patches and Customizations", "east")

	hostile := []string{"via-json-replace", "via-json-add", "via-apply-namespace"}
	for name := range patches {
		hostile = append(hostile, "by-"+name)
	}

	t.Run("the view withholds A's objects and shows nothing of A elsewhere", func(t *testing.T) {
		view := viewClient(t, env.viewKubeconfig["east"])
		for _, name := range hostile {
			_, err := view.Resource(configMapsGVR).Namespace("tenant-a").Get(ctx, name, metav1.GetOptions{})
			if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "which a rendering may not change") {
				t.Errorf("GET of tenant-a/%s through east's view: %v, want 503 saying it may not change that", name, err)
			}
		}
		list, err := view.Resource(configMapsGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range list.Items {
			if item.GetNamespace() != "tenant-a" && item.GetName() != "victim" {
				t.Errorf("east's view shows %s/%s", item.GetNamespace(), item.GetName())
			}
			if item.GetName() == "victim" && string(item.GetUID()) != victimSourceUID {
				t.Errorf("east's view shows %s as tenant-b/victim", item.GetUID())
			}
		}
	})

	t.Run("the target is untouched outside tenant A's namespace and names", func(t *testing.T) {
		now := env.targetObject(t, ctx, "east", configMapsGVR, "tenant-b", "victim")
		if now == nil {
			t.Fatal("tenant B's copy is gone")
		}
		owner, _, _ := unstructured.NestedString(now.Object, "data", "owner")
		if now.GetUID() != victim.GetUID() || owner != "b" || now.GetAnnotations()[contract.SourceUIDAnnotation] != victimSourceUID {
			t.Errorf("tenant B's copy changed: %v", now.Object)
		}
		if planted := env.targetObject(t, ctx, "east", configMapsGVR, "kube-system", "planted"); planted != nil {
			t.Errorf("tenant A planted a ConfigMap in kube-system: %v", planted.Object)
		}
		for _, ns := range []string{"tenant-a", "tenant-b", "kube-system", "default"} {
			l, err := env.tgt["east"].Resource(configMapsGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: contract.LocationLabel + "=east"})
			if err != nil {
				t.Fatal(err)
			}
			for _, item := range l.Items {
				if key := ns + "/" + item.GetName(); key != "tenant-b/victim" && key != "tenant-a/fine" {
					t.Errorf("east's target holds %s (from %s)", key, item.GetAnnotations()[contract.SourceNameAnnotation])
				}
			}
		}
	})

	t.Run("the refusal is reported on the objects and in the Customizations' status", func(t *testing.T) {
		admin := env.src
		mapperEventually(t, ctx, 60*time.Second, "a Warning Event ProtectedFieldChanged on each of A's objects", func() (bool, string) {
			l, err := admin.Resource(eventsGVR).Namespace("tenant-a").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			seen := map[string]bool{}
			for _, e := range l.Items {
				reason, _, _ := unstructured.NestedString(e.Object, "reason")
				typ, _, _ := unstructured.NestedString(e.Object, "type")
				name, _, _ := unstructured.NestedString(e.Object, "regarding", "name")
				if reason == "ProtectedFieldChanged" && typ == "Warning" {
					seen[name] = true
				}
			}
			var missing []string
			for _, name := range hostile {
				if !seen[name] {
					missing = append(missing, name)
				}
			}
			return len(missing) == 0, fmt.Sprintf("no Event on %v", missing)
		})
		for name := range mutations {
			st := waitCustomizationCondition(t, ctx, custs, name, controlv1alpha1.CustomizationReady, "False", controlv1alpha1.ReasonRenderFailed)
			if st.FailingObjects != 1 || len(st.Failures) != 1 || st.Failures[0].Reason != "ProtectedFieldChanged" ||
				st.Failures[0].Name != "tenant-a/via-"+name || st.Failures[0].Location != "east" {
				t.Errorf("Customization %s: failingObjects %d, failures %+v; want via-%s for east, ProtectedFieldChanged", name, st.FailingObjects, st.Failures, name)
			} else {
				t.Logf("Customization %s: %s", name, st.Failures[0].Message)
			}
		}
	})
}

// heapAfterGC returns mapper-apiserver's HeapAlloc in bytes right after two garbage
// collections (its /debug/pprof/heap?gc=1&debug=1 prints runtime.MemStats after collecting;
// the second collection also frees what sync.Pools kept through the first).
func heapAfterGC(t *testing.T, ctx context.Context, server *framework.MapperAPIServer, u *framework.User) uint64 {
	t.Helper()
	client, err := rest.HTTPClientFor(server.Config(u))
	if err != nil {
		t.Fatal(err)
	}
	readHeap(t, ctx, client, server.URL)
	return readHeap(t, ctx, client, server.URL)
}

// readHeap collects garbage in the server at base and returns its HeapAlloc.
func readHeap(t *testing.T, ctx context.Context, client *http.Client, base string) uint64 {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/debug/pprof/heap?gc=1&debug=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapAlloc = "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no HeapAlloc in mapper-apiserver's heap profile (%s)", resp.Status)
	return 0
}

// TestRenderingTooLargeIsRefused (docs/customization.md, "What a
// rendering may not change"): a tenant's Customization of 4 mutations, each adding a list of 8
// copies of the object so far, would make a one-key ConfigMap's rendering 7.7 MB. On real
// servers it is refused with RenderingTooLarge at the mutation that passes the bound, in the
// Customization's status, the 503 of east's view and an Event on the object; the ConfigMap does
// not reach east, the tenant's other ConfigMaps do; and 8 versions of it leave
// mapper-apiserver's heap (after a collection) less than 60 MB larger (without the bound each
// version kept about 22 MB).
func TestRenderingTooLargeIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := startLocationsEnv(t, ctx, "east")
	a := startTenant(t, ctx, env, "tenant-a")
	// mapper-controller writes the status of Customizations from what `locations` reports.
	framework.StartMapperController(t, ctx, env.source, time.Minute, "--controllers=customizationstatus")
	env.startMapper(t, "mapper-east", "east", nil, locationMapperArgs...)

	blowUp := hostileCustomization("blow-up", nil)
	var mutations []interface{}
	for i := 0; i < 4; i++ {
		mutations = append(mutations, map[string]interface{}{"patchType": "JSONPatch", "jsonPatch": map[string]interface{}{
			"expression": fmt.Sprintf(`[JSONPatch{op: "add", path: "/data/copy%d", value: [object, object, object, object, object, object, object, object]}]`, i)}})
	}
	blowUp.Object["spec"].(map[string]interface{})["mutations"] = mutations
	custs := a.Resource(customization.Resource).Namespace("tenant-a")
	if _, err := custs.Create(ctx, blowUp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Resource(configMapsGVR).Namespace("tenant-a").Create(ctx, tenantConfigMap("tenant-a", "plain", "a", "", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mapperEventually(t, ctx, 90*time.Second, "tenant A's plain ConfigMap on east", func() (bool, string) {
		return env.targetObject(t, ctx, "east", configMapsGVR, "tenant-a", "plain") != nil, "absent"
	})

	one := tenantConfigMap("tenant-a", "one", strings.Repeat("v", 1000), "", map[string]string{"via": "blow-up"})
	if _, err := a.Resource(configMapsGVR).Namespace("tenant-a").Create(ctx, one, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := waitCustomizationCondition(t, ctx, custs, "blow-up", controlv1alpha1.CustomizationReady, "False", controlv1alpha1.ReasonRenderFailed)
	if len(st.Failures) != 1 || st.Failures[0].Reason != "RenderingTooLarge" || !strings.Contains(st.Failures[0].Message, "spec.mutations[3]") ||
		!strings.Contains(st.Failures[0].Message, "3145728") {
		t.Errorf("the Customization's failures %+v, want tenant-a/one refused as RenderingTooLarge at spec.mutations[3] over 3145728 bytes", st.Failures)
	} else {
		t.Logf("status: %s", st.Failures[0].Message)
	}
	view := viewClient(t, env.viewKubeconfig["east"])
	_, err := view.Resource(configMapsGVR).Namespace("tenant-a").Get(ctx, "one", metav1.GetOptions{})
	if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "RenderingTooLarge") {
		t.Errorf("GET of tenant-a/one through east's view: %v, want 503 RenderingTooLarge", err)
	}
	mapperEventually(t, ctx, 60*time.Second, "a Warning Event RenderingTooLarge on tenant-a/one", func() (bool, string) {
		l, err := env.src.Resource(eventsGVR).Namespace("tenant-a").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range l.Items {
			reason, _, _ := unstructured.NestedString(e.Object, "reason")
			name, _, _ := unstructured.NestedString(e.Object, "regarding", "name")
			if reason == "RenderingTooLarge" && name == "one" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d Events, none about one", len(l.Items))
	})

	before := heapAfterGC(t, ctx, env.server, env.source.Admin())
	failures := func() float64 {
		return env.server.Metric(t, env.source.Admin(), "mapper_apiserver_customization_failures_total", `resource="configmaps"`)
	}
	// One version at a time: the renderer renders an object's newest version, so versions
	// written faster than it renders are skipped, not refused.
	for i := 0; i < 8; i++ {
		counted := failures()
		env.mutate(t, ctx, configMapsGVR, "tenant-a", "one", func(u *unstructured.Unstructured) {
			u.Object["data"] = map[string]interface{}{"owner": strings.Repeat(strconv.Itoa(i), 1000)}
		})
		mapperEventually(t, ctx, 60*time.Second, fmt.Sprintf("refused version %d of 8 counted", i+1), func() (bool, string) {
			return failures() > counted, fmt.Sprintf("mapper_apiserver_customization_failures_total %v (was %v)", failures(), counted)
		})
	}
	after := heapAfterGC(t, ctx, env.server, env.source.Admin())
	t.Logf("mapper-apiserver's heap after a collection: %d MB before 8 refused versions, %d MB after", before>>20, after>>20)
	if after > before+60<<20 {
		t.Errorf("the heap grew by %d MB over 8 refused versions; the refused renderings are kept", (after-before)>>20)
	}
	env.converge(t, ctx, "the refused blow-up", "east")
	if u := env.targetObject(t, ctx, "east", configMapsGVR, "tenant-a", "one"); u != nil {
		t.Errorf("the blown-up ConfigMap reached east (%d keys)", len(u.Object["data"].(map[string]interface{})))
	}
}
