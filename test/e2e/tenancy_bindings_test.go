package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	ctrlbinding "github.com/cluster-mapper/cluster-mapper/pkg/controller/binding"
	ctrlplacement "github.com/cluster-mapper/cluster-mapper/pkg/controller/placement"
	ctrlstatuscollector "github.com/cluster-mapper/cluster-mapper/pkg/controller/statuscollector"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// secretEndpoint is a SyncTarget annotation no tenant may read (F5).
const secretEndpoint = "10.1.2.3:6443"

// tenancyEnv is a source with two registered locations, east (a view only) and west (a view,
// a target and a mapper), mapper-apiserver and mapper-controller in the Bound location-access
// mode, and two tenants, tenant-a and tenant-b: ServiceAccounts with a Role in their own
// namespace only (ConfigMaps, Placements, Customizations, StatusCollectors, StatusSummaries).
type tenancyEnv struct {
	*locationsEnv
	// tenants are the tenants' dynamic clients of the source, by namespace.
	tenants map[string]dynamic.Interface
	// admin reads the views straight from mapper-apiserver.
	admin *framework.User
}

// startTenancyEnv starts the tenancy environment. tenant-a is bound to east, tenant-b to
// west, each by a LocationBinding "locations" (locationNames) that only the administrator
// may write.
func startTenancyEnv(t *testing.T, ctx context.Context) *tenancyEnv {
	t.Helper()
	env := &tenancyEnv{locationsEnv: startLocationsEnvWith(t, ctx, "configmaps", nil, []string{"--location-access=Bound"}, "west"), tenants: map[string]dynamic.Interface{}}
	env.admin = env.source.Admin()
	// east is registered without a target: its view is all the tests read of it. A heartbeat
	// reports it Ready, so that Placements may give it work.
	if _, err := env.dyn.Resource(synctarget.Resource).Create(ctx, newSyncTarget("east", map[string]string{"region": "east"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"east", "west"} {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"secret.example.com/endpoint":%q}}}`, secretEndpoint)
		if _, err := env.dyn.Resource(synctarget.Resource).Patch(ctx, l, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	framework.StartMapperController(t, ctx, env.source, 40*time.Second, "--location-access=Bound", "--unbound-report-resources=configmaps")
	reportReady(t, ctx, env.source, env.dyn, "east")

	kube := env.admin.Client(t)
	for ns, loc := range map[string]string{"tenant-a": "east", "tenant-b": "west"} {
		ensureNamespace(t, ctx, env.src, ns)
		setBinding(t, ctx, env.dyn, ns, loc)
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"*"}},
			{APIGroups: []string{"control.mapper.kcp.io"}, Resources: []string{"placements", "customizations", "statuscollectors"}, Verbs: []string{"*"}},
			{APIGroups: []string{"control.mapper.kcp.io"}, Resources: []string{"statussummaries", "locationbindings"}, Verbs: []string{"get", "list", "watch"}},
		}}
		if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "tenant"}}}
		if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		token := serviceAccountToken(t, ctx, kube, ns, "tenant")
		d, err := dynamic.NewForConfig(&rest.Config{Host: env.source.URL, BearerToken: token, QPS: -1,
			TLSClientConfig: rest.TLSClientConfig{CAData: env.source.ServingCABundle()}})
		if err != nil {
			t.Fatal(err)
		}
		env.tenants[ns] = d
		waitTenantCan(t, ctx, d, ns)
	}
	return env
}

// setBinding makes the LocationBinding ns/locations bind exactly locations (by name), as the
// administrator.
func setBinding(t *testing.T, ctx context.Context, dyn dynamic.Interface, ns string, locations ...string) {
	t.Helper()
	names := make([]interface{}, len(locations))
	for i, l := range locations {
		names[i] = l
	}
	b := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "control.mapper.kcp.io/v1alpha1", "kind": "LocationBinding",
		"metadata": map[string]interface{}{"name": "locations", "namespace": ns},
		"spec":     map[string]interface{}{"locationNames": names},
	}}
	raw, err := json.Marshal(b.Object)
	if err != nil {
		t.Fatal(err)
	}
	force := true
	if _, err := dyn.Resource(locationbinding.Resource).Namespace(ns).Patch(ctx, "locations", types.ApplyPatchType, raw,
		metav1.PatchOptions{FieldManager: "e2e-admin", Force: &force}); err != nil {
		t.Fatalf("binding %s to %v: %v", ns, locations, err)
	}
}

// waitTenantCan waits until RBAC lets the tenant of ns list its ConfigMaps (RBAC takes new
// bindings through an informer).
func waitTenantCan(t *testing.T, ctx context.Context, d dynamic.Interface, ns string) {
	t.Helper()
	mapperEventually(t, ctx, 30*time.Second, "the tenant of "+ns+" may list its ConfigMaps", func() (bool, string) {
		_, err := d.Resource(configMapsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// viewNames returns the names of the ConfigMaps of ns in location's view, as the administrator.
func (e *tenancyEnv) viewNames(t *testing.T, ctx context.Context, location, ns string) []string {
	t.Helper()
	list, err := e.view(t, location).Resource(configMapsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing %s's view of %s: %v", location, ns, err)
	}
	var out []string
	for _, o := range list.Items {
		out = append(out, o.GetName())
	}
	slices.Sort(out)
	return out
}

// view returns a dynamic client of location's view, as the administrator.
func (e *tenancyEnv) view(t *testing.T, location string) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(e.server.ViewConfig(e.admin, location))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// viewEvents follows the ConfigMaps of namespace ns in a view the way a client does, with a
// client-go informer: a watch the server ends is resumed, and one it cannot resume (a
// re-rendering that restarted the resource's history answers 410: docs/views.md) is replaced
// by a new list, which reports what the client missed (a deletion then arrives as a tombstone).
// It returns the informer's events, the object of a DELETED unwrapped from its tombstone.
func viewEvents(t *testing.T, ctx context.Context, client dynamic.Interface, ns string) <-chan watch.Event {
	t.Helper()
	events := make(chan watch.Event, 1000)
	send := func(typ watch.EventType, obj interface{}) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			select {
			case events <- watch.Event{Type: typ, Object: u}:
			case <-ctx.Done():
			}
		}
	}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, ns, nil)
	informer := factory.ForResource(configMapsGVR).Informer()
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { send(watch.Added, obj) },
		UpdateFunc: func(_, obj interface{}) { send(watch.Modified, obj) },
		DeleteFunc: func(obj interface{}) { send(watch.Deleted, obj) },
	}); err != nil {
		t.Fatal(err)
	}
	informerCtx, stop := context.WithCancel(ctx)
	t.Cleanup(func() {
		stop()
		factory.Shutdown()
	})
	factory.Start(informerCtx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatalf("the informer of %s's ConfigMaps in the view did not sync", ns)
	}
	return events
}

// awaitEvents reads events until one of type typ has arrived about each of the ConfigMaps
// names (in any order), and fails the test after timeout; it returns how long the first took.
func awaitEvents(t *testing.T, events <-chan watch.Event, typ watch.EventType, timeout time.Duration, names ...string) time.Duration {
	t.Helper()
	start := time.Now()
	var first time.Duration
	deadline := time.After(timeout)
	missing := slices.Clone(names)
	for len(missing) > 0 {
		select {
		case e := <-events:
			u := e.Object.(*unstructured.Unstructured)
			if e.Type != typ || !slices.Contains(missing, u.GetName()) {
				continue
			}
			if first == 0 {
				first = time.Since(start)
			}
			missing = slices.DeleteFunc(missing, func(n string) bool { return n == u.GetName() })
		case <-deadline:
			t.Fatalf("no %s of %v within %s", typ, missing, timeout)
		}
	}
	return first
}

// TestTenancyBindings (location access, in the Bound mode, on real servers): a tenant cannot
// place on, or be seen by, a location not bound to its namespace, whether it writes the
// assignment itself or a Placement does; the assignment is ignored and reported (an Event on
// the object, the Placement's status); a binding added or removed takes effect within seconds,
// as additions and deletions an informer of the location's view sees (the server may end its
// watch meanwhile: a re-rendering at a fresh resourceVersion restarts the history when a
// source event older than it arrives after it), and the location's mapper copies, then
// removes, the objects; a tenant cannot write LocationBindings.
func TestTenancyBindings(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := startTenancyEnv(t, ctx)
	a, b := env.tenants["tenant-a"], env.tenants["tenant-b"]
	env.startMapper(t, "mapper-west", "west", nil, locationMapperArgs...)

	// Hand-written assignments: both tenants name both locations.
	for ns, d := range map[string]dynamic.Interface{"tenant-a": a, "tenant-b": b} {
		if _, err := d.Resource(configMapsGVR).Namespace(ns).Create(ctx, newConfigMap(ns, "direct", "east", "west"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("the tenant of %s creating its ConfigMap: %v", ns, err)
		}
	}

	t.Run("a hand-written assignment reaches bound locations only", func(t *testing.T) {
		mapperEventually(t, ctx, time.Minute, "east's view shows tenant-a/direct, west's tenant-b/direct", func() (bool, string) {
			ea, wb := env.viewNames(t, ctx, "east", "tenant-a"), env.viewNames(t, ctx, "west", "tenant-b")
			return slices.Equal(ea, []string{"direct"}) && slices.Equal(wb, []string{"direct"}), fmt.Sprintf("east/tenant-a %v, west/tenant-b %v", ea, wb)
		})
		if got := env.viewNames(t, ctx, "west", "tenant-a"); len(got) != 0 {
			t.Errorf("west's view shows tenant-a's %v; west is not bound to tenant-a", got)
		}
		if got := env.viewNames(t, ctx, "east", "tenant-b"); len(got) != 0 {
			t.Errorf("east's view shows tenant-b's %v; east is not bound to tenant-b", got)
		}
		if _, err := env.view(t, "west").Resource(configMapsGVR).Namespace("tenant-a").Get(ctx, "direct", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("GET tenant-a/direct in west's view: %v, want 404", err)
		}
		mapperEventually(t, ctx, time.Minute, "the west mapper copied tenant-b/direct and nothing of tenant-a", func() (bool, string) {
			return env.targetObject(t, ctx, "west", configMapsGVR, "tenant-b", "direct") != nil, "no copy yet"
		})
		if env.targetObject(t, ctx, "west", configMapsGVR, "tenant-a", "direct") != nil {
			t.Error("west's target has a copy of tenant-a/direct")
		}
		if v := env.server.Metric(t, env.admin, "mapper_apiserver_unbound_assignments_total", `resource="configmaps"`); v < 2 {
			t.Errorf("mapper_apiserver_unbound_assignments_total = %v, want at least 2 (one per tenant's object)", v)
		}
	})

	t.Run("an ignored assignment is reported by an Event on the object", func(t *testing.T) {
		for ns, loc := range map[string]string{"tenant-a": "west", "tenant-b": "east"} {
			mapperEventually(t, ctx, time.Minute, "a Warning Event UnboundLocation on "+ns+"/direct", func() (bool, string) {
				list, err := env.dyn.Resource(eventsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, err.Error()
				}
				var seen []string
				for _, e := range list.Items {
					note, _, _ := unstructured.NestedString(e.Object, "note")
					kind, _, _ := unstructured.NestedString(e.Object, "regarding", "kind")
					name, _, _ := unstructured.NestedString(e.Object, "regarding", "name")
					reason, _, _ := unstructured.NestedString(e.Object, "reason")
					if kind == "ConfigMap" && name == "direct" && reason == ctrlbinding.ReasonUnboundLocation && strings.Contains(note, loc) && strings.Contains(note, ns) {
						return true, ""
					}
					seen = append(seen, kind+"/"+name+" "+reason+": "+note)
				}
				return false, fmt.Sprint(seen)
			})
		}
	})

	t.Run("a Placement chooses bound locations only and says which are not", func(t *testing.T) {
		pl := newPlacement("tenant-a", "everywhere", "", "v1", "configmaps", map[string]interface{}{
			"objectSelector":   map[string]interface{}{"matchLabels": map[string]interface{}{"placed": "yes"}},
			"locationSelector": map[string]interface{}{},
		})
		if _, err := a.Resource(ctrlplacement.Resource).Namespace("tenant-a").Create(ctx, pl, metav1.CreateOptions{}); err != nil {
			t.Fatalf("the tenant creating its Placement: %v", err)
		}
		placed := newConfigMap("tenant-a", "placed")
		placed.SetLabels(map[string]string{"placed": "yes"})
		if _, err := a.Resource(configMapsGVR).Namespace("tenant-a").Create(ctx, placed, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitAssignment(t, ctx, env.src.Resource(configMapsGVR).Namespace("tenant-a"), "placed", `["east"]`, "everywhere")
		waitPlacementReady(t, ctx, env.locationsEnv, "tenant-a", "everywhere", "names west as not bound", func(_, msg string) bool {
			return strings.Contains(msg, "not bound to this namespace") && strings.Contains(msg, "west")
		})
	})

	t.Run("a tenant cannot bind itself", func(t *testing.T) {
		b := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "control.mapper.kcp.io/v1alpha1", "kind": "LocationBinding",
			"metadata": map[string]interface{}{"name": "mine", "namespace": "tenant-a"},
			"spec":     map[string]interface{}{"locationSelector": map[string]interface{}{}},
		}}
		_, err := a.Resource(locationbinding.Resource).Namespace("tenant-a").Create(ctx, b, metav1.CreateOptions{})
		expectForbidden(t, "a tenant creating a LocationBinding", err, "locationbindings")
	})

	t.Run("a binding added or removed takes effect within seconds", func(t *testing.T) {
		w := viewEvents(t, ctx, env.view(t, "west"), "tenant-a")

		setBinding(t, ctx, env.dyn, "tenant-a", "east", "west")
		// direct by the binding itself; placed once the Placement takes west too.
		took := awaitEvents(t, w, watch.Added, 30*time.Second, "direct", "placed")
		t.Logf("west's view showed tenant-a's objects %s after the binding", took)
		if took > 10*time.Second {
			t.Errorf("the first ADDED came %s after the binding, want within seconds", took)
		}
		mapperEventually(t, ctx, time.Minute, "the west mapper copied tenant-a/direct", func() (bool, string) {
			return env.targetObject(t, ctx, "west", configMapsGVR, "tenant-a", "direct") != nil, "no copy yet"
		})
		mapperEventually(t, ctx, time.Minute, "the LocationBinding's status lists east and west", func() (bool, string) {
			u, err := env.dyn.Resource(locationbinding.Resource).Namespace("tenant-a").Get(ctx, "locations", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			locs, _, _ := unstructured.NestedStringSlice(u.Object, "status", "locations")
			n, _, _ := unstructured.NestedInt64(u.Object, "status", "boundLocations")
			return slices.Equal(locs, []string{"east", "west"}) && n == 2, fmt.Sprintf("locations %v, boundLocations %d", locs, n)
		})

		setBinding(t, ctx, env.dyn, "tenant-a", "east")
		took = awaitEvents(t, w, watch.Deleted, 15*time.Second, "direct", "placed")
		t.Logf("west's view deleted tenant-a's objects %s after the binding's removal", took)
		if took > 10*time.Second {
			t.Errorf("the first DELETED came %s after the binding's removal, want within seconds", took)
		}
		mapperEventually(t, ctx, time.Minute, "the west mapper removed its copy of tenant-a/direct", func() (bool, string) {
			return env.targetObject(t, ctx, "west", configMapsGVR, "tenant-a", "direct") == nil, "the copy is still there"
		})
		if env.targetObject(t, ctx, "west", configMapsGVR, "tenant-b", "direct") == nil {
			t.Error("west's copy of tenant-b/direct, still bound, is gone")
		}
	})
}

// TestTenancyLeastDisclosure (F5, in the Bound mode): a tenant's Customization and
// StatusCollector see of a location its name and labels only, and only of a location bound to
// the tenant's namespace: never a SyncTarget's annotations, never anything of an unbound
// location, even when the tenant assigns its object there and writes that location's status
// record itself.
func TestTenancyLeastDisclosure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := startTenancyEnv(t, ctx)
	a := env.tenants["tenant-a"]
	configMaps := a.Resource(configMapsGVR).Namespace("tenant-a")

	customizationOf := func(name, label, expression string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "control.mapper.kcp.io/v1alpha1", "kind": "Customization",
			"metadata": map[string]interface{}{"name": name, "namespace": "tenant-a"},
			"spec": map[string]interface{}{
				"resources":      []interface{}{map[string]interface{}{"apiGroups": []interface{}{""}, "apiVersions": []interface{}{"v1"}, "resources": []interface{}{"configmaps"}}},
				"objectSelector": map[string]interface{}{"matchLabels": map[string]interface{}{label: "yes"}},
				"mutations": []interface{}{map[string]interface{}{"patchType": "JSONPatch", "jsonPatch": map[string]interface{}{
					"expression": `[JSONPatch{op: "add", path: "/data/seen", value: ` + expression + `}]`}}},
			},
		}}
	}

	t.Run("a Customization reads the name and labels of a bound location", func(t *testing.T) {
		if _, err := a.Resource(customization.Resource).Namespace("tenant-a").Create(ctx,
			customizationOf("where", "where", `location.metadata.name + "/" + location.metadata.labels["region"]`), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cm := newConfigMap("tenant-a", "where", "east", "west")
		cm.SetLabels(map[string]string{"where": "yes"})
		if _, err := configMaps.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		mapperEventually(t, ctx, time.Minute, "east's view renders data.seen = east/east", func() (bool, string) {
			u, err := env.view(t, "east").Resource(configMapsGVR).Namespace("tenant-a").Get(ctx, "where", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			seen, _, _ := unstructured.NestedString(u.Object, "data", "seen")
			return seen == "east/east", seen
		})
	})

	t.Run("a Customization cannot read a SyncTarget's annotations", func(t *testing.T) {
		if _, err := a.Resource(customization.Resource).Namespace("tenant-a").Create(ctx,
			customizationOf("peek", "peek", `location.metadata.annotations["secret.example.com/endpoint"]`), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cm := newConfigMap("tenant-a", "peek", "east")
		cm.SetLabels(map[string]string{"peek": "yes"})
		if _, err := configMaps.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		st := waitCustomizationCondition(t, ctx, a.Resource(customization.Resource).Namespace("tenant-a"), "peek", "Compiled", "False", "CompilationFailed")
		if b, _ := json.Marshal(st); !strings.Contains(string(b), "annotations") {
			t.Errorf("the compile error does not name the annotations: %s", b)
		}
		u, err := env.view(t, "east").Resource(configMapsGVR).Namespace("tenant-a").Get(ctx, "peek", metav1.GetOptions{})
		if err == nil {
			raw, _ := json.Marshal(u.Object)
			if strings.Contains(string(raw), secretEndpoint) {
				t.Fatalf("east's view shows a SyncTarget annotation: %s", raw)
			}
		} else if strings.Contains(err.Error(), secretEndpoint) {
			t.Fatalf("east's view answers with a SyncTarget annotation: %v", err)
		}
	})

	t.Run("a StatusCollector sees bound locations only, names and labels only", func(t *testing.T) {
		// A Deployment, which mapper-apiserver does not mirror here, so the status records the
		// tenant writes itself stay as written (west's view would never show the object, so
		// only the tenant can have written west's).
		probe := newDeployment("tenant-a", "probe", "east", "west")
		ann := probe.GetAnnotations()
		ann[contract.StatusRecordAnnotationPrefix+"east"] = `{"replicas":1}`
		ann[contract.StatusRecordAnnotationPrefix+"west"] = `{"replicas":1}`
		probe.SetAnnotations(ann)
		probe.SetLabels(map[string]string{"probe": "yes"})
		if _, err := a.Resource(deploymentsGVR).Namespace("tenant-a").Create(ctx, probe, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		collector := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "control.mapper.kcp.io/v1alpha1", "kind": "StatusCollector",
			"metadata": map[string]interface{}{"name": "probe", "namespace": "tenant-a"},
			"spec": map[string]interface{}{
				"resources":      []interface{}{map[string]interface{}{"apiGroups": []interface{}{"apps"}, "apiVersions": []interface{}{"v1"}, "resources": []interface{}{"deployments"}}},
				"objectSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"probe": "yes"}},
				"select": []interface{}{
					map[string]interface{}{"name": "where", "expression": `location.metadata.name + "/" + location.metadata.labels["region"]`},
					map[string]interface{}{"name": "endpoint", "expression": `location.metadata.annotations["secret.example.com/endpoint"]`},
				},
			},
		}}
		if _, err := a.Resource(ctrlstatuscollector.CollectorsResource).Namespace("tenant-a").Create(ctx, collector, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var raw string
		mapperEventually(t, ctx, 2*time.Minute, "the StatusSummary has east's row", func() (bool, string) {
			s, err := a.Resource(ctrlstatuscollector.SummariesResource).Namespace("tenant-a").Get(ctx, "probe", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			b, _ := json.Marshal(s.Object["results"])
			raw = string(b)
			rows, _, _ := unstructured.NestedInt64(s.Object, "results", "rows")
			return rows > 0, raw
		})
		for _, leak := range []string{secretEndpoint, "west"} {
			if strings.Contains(raw, leak) {
				t.Errorf("the StatusSummary shows %q: %s", leak, raw)
			}
		}
		if !strings.Contains(raw, `"rows":1`) || !strings.Contains(raw, "east/east") {
			t.Errorf("the StatusSummary = %s, want one row, east's", raw)
		}
	})
}

// TestTenancyLocationsList (F9, in the Bound mode): names written into an assignment do not
// show in `kubectl get locations`, neither by default nor among the unregistered locations
// (they are bound to no namespace, so no view has objects for them).
func TestTenancyLocationsList(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := startTenancyEnv(t, ctx)
	var fakes []string
	for i := range 40 {
		fakes = append(fakes, fmt.Sprintf("fake-%02d", i))
	}
	if _, err := env.tenants["tenant-b"].Resource(configMapsGVR).Namespace("tenant-b").Create(ctx, newConfigMap("tenant-b", "fakes", append(fakes, "west")...), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mapperEventually(t, ctx, time.Minute, "west's view shows tenant-b/fakes", func() (bool, string) {
		got := env.viewNames(t, ctx, "west", "tenant-b")
		return slices.Equal(got, []string{"fakes"}), fmt.Sprint(got)
	})
	kc := env.admin.KubeconfigFor(t, env.server.URL, env.server.ServingCA.CertPEM)
	for _, args := range [][]string{{"get", "locations"}, {"get", "locations", "--field-selector", "status.registered=false"}} {
		out, err := framework.RunKubectl(t, kc, append(args, "-o", "name")...)
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		if strings.Contains(out, "fake-") {
			t.Errorf("kubectl %s lists the names of an assignment:\n%s", strings.Join(args, " "), out)
		}
		if len(args) == 2 && (!strings.Contains(out, "location.mapper.kcp.io/east") || !strings.Contains(out, "location.mapper.kcp.io/west")) {
			t.Errorf("kubectl get locations lacks the registered east and west:\n%s", out)
		}
	}
}
