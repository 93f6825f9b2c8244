package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	ctrlstatuscollector "github.com/cluster-mapper/cluster-mapper/pkg/controller/statuscollector"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// The tests of this file are the reproductions of the fairness findings F2, F3 and F4 (two
// tenants, ServiceAccounts with a Role in their own namespace only): one tenant's expensive
// Customizations, large writes or expensive StatusCollectors must not delay, stall or exhaust
// what the other tenant gets (docs/customization.md and docs/status.md, "Fairness and
// budgets"; docs/views.md, "Deferred renderings" and "Event history").

// fairnessTenant is a tenant of the source: a namespace, and a client with the identity of a
// ServiceAccount of it that may use ConfigMaps, Customizations and StatusCollectors there, and
// read StatusSummaries, and nothing else.
type fairnessTenant struct {
	namespace string
	dyn       dynamic.Interface
}

// newFairnessTenant creates namespace, its ServiceAccount "tenant" with a Role of its own
// namespace only, and returns the tenant with a client of that ServiceAccount (a token from the
// TokenRequest API), once RBAC lets it list ConfigMaps there.
func newFairnessTenant(t *testing.T, ctx context.Context, source *framework.ControlPlane, namespace string) *fairnessTenant {
	t.Helper()
	admin := source.Admin().Client(t)
	framework.EnsureNamespace(t, ctx, source, namespace)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: namespace}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}},
		{APIGroups: []string{controlv1alpha1.GroupName}, Resources: []string{"customizations", "statuscollectors"}, Verbs: []string{"*"}},
		{APIGroups: []string{controlv1alpha1.GroupName}, Resources: []string{"statussummaries"}, Verbs: []string{"get", "list", "watch"}},
	}}
	if _, err := admin.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Role of %s: %v", namespace, err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: namespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
		Subjects: []rbacv1.Subject{serviceAccountSubject(namespace, "tenant")}}
	if _, err := admin.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the RoleBinding of %s: %v", namespace, err)
	}
	token := serviceAccountToken(t, ctx, admin, namespace, "tenant")
	dyn, err := dynamic.NewForConfig(&rest.Config{Host: source.URL, BearerToken: token, QPS: -1,
		TLSClientConfig: rest.TLSClientConfig{CAData: source.ServingCABundle()}})
	if err != nil {
		t.Fatal(err)
	}
	tn := &fairnessTenant{namespace: namespace, dyn: dyn}
	mapperEventually(t, ctx, 30*time.Second, "RBAC lets tenant "+namespace+" list its ConfigMaps", func() (bool, string) {
		_, err := tn.configMaps().List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, fmt.Sprint(err)
	})
	if _, err := dyn.Resource(configMapsGVR).Namespace("kube-system").List(ctx, metav1.ListOptions{Limit: 1}); !apierrors.IsForbidden(err) {
		t.Fatalf("tenant %s lists ConfigMaps of kube-system: %v, want 403", namespace, err)
	}
	return tn
}

// configMaps is the tenant's ConfigMaps.
func (tn *fairnessTenant) configMaps() dynamic.ResourceInterface {
	return tn.dyn.Resource(configMapsGVR).Namespace(tn.namespace)
}

// assignedConfigMap returns ConfigMap namespace/name assigned to location with data.
func assignedConfigMap(namespace, name, location string, data map[string]interface{}) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": name, "namespace": namespace,
			"annotations": map[string]interface{}{contract.AssignedLocationsAnnotation: `["` + location + `"]`}},
		"data": data,
	}}
}

// configMapsRule is the resources of a Customization or StatusCollector that selects
// ConfigMaps.
func configMapsRule() []interface{} {
	return []interface{}{map[string]interface{}{"apiGroups": []interface{}{""}, "apiVersions": []interface{}{"v1"}, "resources": []interface{}{"configmaps"}}}
}

// heavyExpression is a CEL expression under the per-expression cost limit (about 500,000 of
// 1,000,000) that takes about a third of a second here: it builds lists.
const heavyExpression = `string(lists.range(120).map(i, lists.range(120).map(j, lists.range(10).size())).size())`

// heavyCustomization is a Customization of namespace with 32 mutations, the most the CRD
// allows, each one heavyExpression: about 10 s of CEL per object version and location when
// nothing bounds it (finding F2).
func heavyCustomization(namespace string) *unstructured.Unstructured {
	var mutations []interface{}
	for i := range 32 {
		mutations = append(mutations, map[string]interface{}{"patchType": "JSONPatch", "jsonPatch": map[string]interface{}{
			"expression": fmt.Sprintf(`[JSONPatch{op: "add", path: "/data/m%d", value: %s}]`, i, heavyExpression)}})
	}
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": controlv1alpha1.SchemeGroupVersion.String(), "kind": "Customization",
		"metadata": map[string]interface{}{"name": "heavy", "namespace": namespace},
		"spec": map[string]interface{}{
			"resources": configMapsRule(),
			"mutations": mutations,
		},
	}}
}

// waitCondition waits until the object of gvr namespace/name (read with dyn) has the condition
// typ with status and reason, and returns its message.
func waitCondition(t *testing.T, ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, namespace, name, typ string, status metav1.ConditionStatus, reason string, timeout time.Duration) string {
	t.Helper()
	var msg string
	mapperEventually(t, ctx, timeout, fmt.Sprintf("%s %s/%s has %s=%s (%s)", gvr.Resource, namespace, name, typ, status, reason), func() (bool, string) {
		u, err := dyn.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var conditions []metav1.Condition
		raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range raw {
			m, _ := c.(map[string]interface{})
			conditions = append(conditions, metav1.Condition{Type: fmt.Sprint(m["type"]), Status: metav1.ConditionStatus(fmt.Sprint(m["status"])),
				Reason: fmt.Sprint(m["reason"]), Message: fmt.Sprint(m["message"])})
		}
		c := meta.FindStatusCondition(conditions, typ)
		if c == nil {
			return false, fmt.Sprintf("no %s condition: %v", typ, conditions)
		}
		msg = c.Message
		return c.Status == status && c.Reason == reason, fmt.Sprintf("%s=%s (%s): %s", typ, c.Status, c.Reason, c.Message)
	})
	return msg
}

// TestFairRendering (finding F2): tenant A's Customization of 32 mutations, each under the
// per-expression cost limit (about 10 s of CEL per object version), is active while A writes
// its ConfigMap over and over; tenant B's 20 writes are each in B's view within 1 s (p99 of
// 20, i.e. the slowest), and B's consistent GETs through the view never answer 504. A's
// Customization, whose renderings go past the budget per object version, is Degraded
// (BudgetExceeded), and A's object is never shown without it.
func TestFairRendering(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	source := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source"})
	framework.InstallControlCRDs(t, ctx, source)
	server := framework.StartMapperAPIServer(t, source, "--resources=configmaps", "--bookmark-interval=1s")
	// mapper-controller writes the status of Customizations (Compiled, Degraded) from what
	// `locations` reports.
	framework.StartMapperController(t, ctx, source, time.Minute, append(framework.MapperAPIServerArgs(t, server), "--controllers=customizationstatus")...)
	a := newFairnessTenant(t, ctx, source, "tenant-a")
	b := newFairnessTenant(t, ctx, source, "tenant-b")
	view, err := dynamic.NewForConfig(server.ViewConfig(source.Admin(), "east"))
	if err != nil {
		t.Fatal(err)
	}

	if _, err := a.dyn.Resource(customization.Resource).Namespace(a.namespace).Create(ctx, heavyCustomization(a.namespace), metav1.CreateOptions{}); err != nil {
		t.Fatalf("tenant A creating its Customization: %v", err)
	}
	// Once the server compiled it, it renders A's objects with it.
	waitCondition(t, ctx, a.dyn, customization.Resource, a.namespace, "heavy", controlv1alpha1.CustomizationCompiled, metav1.ConditionTrue, controlv1alpha1.ReasonCompiled, time.Minute)
	if _, err := a.configMaps().Create(ctx, assignedConfigMap(a.namespace, "a", "east", map[string]interface{}{"v": "0"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.configMaps().Create(ctx, assignedConfigMap(b.namespace, "b", "east", map[string]interface{}{"v": "start"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bView := view.Resource(configMapsGVR).Namespace(b.namespace)
	mapperEventually(t, ctx, time.Minute, "B's ConfigMap in the view of east", func() (bool, string) {
		_, err := bView.Get(ctx, "b", metav1.GetOptions{ResourceVersion: "0"})
		return err == nil, fmt.Sprint(err)
	})

	// A writes its ConfigMap twice a second for as long as B measures: each version is an
	// expensive rendering.
	aCtx, stopA := context.WithCancel(ctx)
	aDone := make(chan int)
	go func() {
		writes := 0
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-aCtx.Done():
				aDone <- writes
				return
			case <-tick.C:
			}
			writes++
			patch := fmt.Sprintf(`{"data":{"v":"%d"}}`, writes)
			if _, err := a.configMaps().Patch(aCtx, "a", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil && aCtx.Err() == nil {
				t.Errorf("tenant A writing: %v", err)
			}
		}
	}()
	list, err := bView.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=b"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := bView.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=b", ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var latencies []time.Duration
	var timeouts []string
	// B writes twice a second, so that its writes meet A's renderings (each is longer).
	pace := time.NewTicker(500 * time.Millisecond)
	defer pace.Stop()
	for i := range 20 {
		<-pace.C
		want := fmt.Sprintf("w%d", i)
		start := time.Now()
		patch := fmt.Sprintf(`{"data":{"v":%q}}`, want)
		if _, err := b.configMaps().Patch(ctx, "b", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("tenant B writing: %v", err)
		}
		latencies = append(latencies, waitForData(t, ctx, w, want, start))
		got, err := bView.Get(ctx, "b", metav1.GetOptions{}) // consistent
		switch {
		case apierrors.IsTimeout(err), apierrors.ReasonForError(err) == metav1.StatusReasonTimeout:
			timeouts = append(timeouts, err.Error())
		case err != nil:
			t.Fatalf("B's consistent GET: %v", err)
		default:
			if v, _, _ := unstructured.NestedString(got.Object, "data", "v"); v != want {
				t.Errorf("B's consistent GET after write %d shows v=%q, want %q", i, v, want)
			}
		}
	}
	stopA()
	aWrites := <-aDone
	slices.Sort(latencies)
	t.Logf("B's 20 writes reached B's view after (sorted) %v while A wrote %d versions", latencies, aWrites)
	if p99 := latencies[len(latencies)-1]; p99 > time.Second {
		t.Errorf("p99 (the slowest of 20) of B's writes reaching its view: %v, want at most 1s", p99)
	}
	if len(timeouts) > 0 {
		t.Errorf("B's consistent GETs answered 504 %d times: %s", len(timeouts), timeouts[0])
	}

	msg := waitCondition(t, ctx, a.dyn, customization.Resource, a.namespace, "heavy", controlv1alpha1.CustomizationDegraded,
		metav1.ConditionTrue, controlv1alpha1.ReasonBudgetExceeded, 3*time.Minute)
	t.Logf("A's Customization: Degraded (BudgetExceeded): %s", msg)
	// Never shown without its Customization: withheld (it never rendered), a 503 that says why.
	if _, err := view.Resource(configMapsGVR).Namespace(a.namespace).Get(ctx, "a", metav1.GetOptions{ResourceVersion: "0"}); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("A's object, which never rendered within its budget: GET %v, want 503", err)
	}
}

// waitForData reads w until an event shows data.v == want and returns the time since start.
func waitForData(t *testing.T, ctx context.Context, w watch.Interface, want string, start time.Time) time.Duration {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the view's watch ended while waiting for v=%s", want)
			}
			if u, ok := e.Object.(*unstructured.Unstructured); ok {
				if v, _, _ := unstructured.NestedString(u.Object, "data", "v"); v == want {
					return time.Since(start)
				}
			}
		case <-timeout:
			t.Fatalf("v=%s not in the view within 2 minutes", want)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
}

// TestBoundedHistoryMemory (finding F3): 300 writes of one 900 KB ConfigMap (about 257 MiB,
// four times the budget below). A mapper-apiserver that keeps every version in its
// history up to a memory budget of 64 MiB (--watch-history-max-object-size=0, and an age
// bound of an hour, so that only the memory budget can drop what the writes superseded:
// with the default 75 s, the writes outlast the age bound, which alone kept the heap near
// 90 MiB with no memory budget at all) and one with
// the defaults (a superseded version over 256 KiB is not kept) both end with a live heap (HeapAlloc right after forced garbage
// collections, heapAfterGC; the runtime's last own collection may have run mid-write and
// counted what was in flight) within the budget of what they had before the writes (and
// 32 MiB for the rest of the process); resumes answer as kube-apiserver's watch cache does:
// 410 Gone from a resourceVersion older than what is kept, the events from one that is kept.
func TestBoundedHistoryMemory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	const budget = 64 << 20
	source := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source"})
	framework.InstallControlCRDs(t, ctx, source)
	servers := map[string]*framework.MapperAPIServer{
		"budget":   framework.StartMapperAPIServer(t, source, "--resources=configmaps", fmt.Sprintf("--watch-history-memory=%d", budget), "--watch-history-max-object-size=0", "--watch-history-age=1h"),
		"defaults": framework.StartMapperAPIServer(t, source, "--resources=configmaps"),
	}
	a := newFairnessTenant(t, ctx, source, "tenant-a")
	admin := source.Admin()

	base := map[string]float64{}
	for name, s := range servers {
		base[name] = float64(heapAfterGC(t, ctx, s, admin))
	}
	big := strings.Repeat("x", 900_000)
	cm := assignedConfigMap(a.namespace, "large", "east", map[string]interface{}{"v": "0", "big": big})
	created, err := a.configMaps().Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rvs := []string{created.GetResourceVersion()}
	const writes = 300
	for i := 1; i < writes; i++ {
		created.Object["data"] = map[string]interface{}{"v": fmt.Sprint(i), "big": big}
		if created, err = a.configMaps().Update(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		rvs = append(rvs, created.GetResourceVersion())
	}
	last := rvs[len(rvs)-1]
	for name, s := range servers {
		view, err := dynamic.NewForConfig(s.ViewConfig(admin, "east"))
		if err != nil {
			t.Fatal(err)
		}
		views := view.Resource(configMapsGVR).Namespace(a.namespace)
		// The server takes its time for 257 MiB of events: each read waits up to its
		// --freshness-timeout, then answers 504 until it caught up.
		mapperEventually(t, ctx, 10*time.Minute, name+": the last write in the view", func() (bool, string) {
			_, err := views.Get(ctx, "large", metav1.GetOptions{ResourceVersion: last})
			return err == nil, fmt.Sprint(err)
		})
		live := float64(heapAfterGC(t, ctx, s, admin))
		inuse := s.Metric(t, admin, "go_memstats_heap_inuse_bytes", "")
		kept := s.Metric(t, admin, "mapper_apiserver_watch_history_bytes", "")
		t.Logf("%s: live heap %.1f MiB before the writes, %.1f MiB after (+%.1f MiB; budget %d MiB); heap in use %.1f MiB; the history counts %.1f MiB",
			name, base[name]/(1<<20), live/(1<<20), (live-base[name])/(1<<20), budget>>20, inuse/(1<<20), kept/(1<<20))
		if grown := live - base[name]; grown > budget+32<<20 {
			t.Errorf("%s: the live heap grew by %.1f MiB over %d writes of a 900 KB object, more than the history budget (%d MiB) and 32 MiB", name, grown/(1<<20), writes, budget>>20)
		}
		// Resumes: from the first version's resourceVersion the history no longer has what
		// follows: 410, and the client relists.
		if _, err := views.Watch(ctx, metav1.ListOptions{ResourceVersion: rvs[0]}); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			t.Errorf("%s: resume from the first write's resourceVersion %s: %v, want 410", name, rvs[0], err)
		}
		// From the one before the last, the last write follows.
		w, err := views.Watch(ctx, metav1.ListOptions{ResourceVersion: rvs[len(rvs)-2]})
		if err != nil {
			t.Errorf("%s: resume from the second-to-last write's resourceVersion: %v", name, err)
			continue
		}
		waitForData(t, ctx, w, fmt.Sprint(writes-1), time.Now())
		w.Stop()
	}
}

// heavyCollector is a StatusCollector of namespace whose groupBy runs heavyExpression on every
// row (about a third of a second each).
func heavyCollector(namespace, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": controlv1alpha1.SchemeGroupVersion.String(), "kind": "StatusCollector",
		"metadata": map[string]interface{}{"name": name, "namespace": namespace},
		"spec": map[string]interface{}{
			"resources":      configMapsRule(),
			"groupBy":        []interface{}{map[string]interface{}{"name": "heavy", "expression": heavyExpression}},
			"combinedFields": []interface{}{map[string]interface{}{"name": "n", "type": "Count"}},
		},
	}}
}

// sumCollector is a StatusCollector of namespace summing returned.status.ready.
func sumCollector(namespace, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": controlv1alpha1.SchemeGroupVersion.String(), "kind": "StatusCollector",
		"metadata": map[string]interface{}{"name": name, "namespace": namespace},
		"spec": map[string]interface{}{
			"resources":      configMapsRule(),
			"combinedFields": []interface{}{map[string]interface{}{"name": "ready", "type": "Sum", "subject": "returned.status.ready"}},
		},
	}}
}

// withStatusRecord returns a ConfigMap of namespace assigned to east with east's status record
// {"ready": ready} (what a location writes back through its view's /status; written here
// directly by the tenant).
func withStatusRecord(namespace, name string, ready int) *unstructured.Unstructured {
	u := assignedConfigMap(namespace, name, "east", map[string]interface{}{"v": "1"})
	ann := u.GetAnnotations()
	ann[contract.StatusRecordAnnotationPrefix+"east"] = fmt.Sprintf(`{"ready":%d}`, ready)
	u.SetAnnotations(ann)
	return u
}

// TestFairStatusCollectors (finding F4): while tenant A's StatusCollector evaluates an expensive
// expression on each of its 60 rows (about 20 s per summary when nothing bounds it), tenant B's
// StatusSummary follows each change of B's status records within 5 s; A's collector, whose
// summary goes past the budget per summary, is Degraded (BudgetExceeded).
func TestFairStatusCollectors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	source := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source"})
	framework.InstallControlCRDs(t, ctx, source)
	a := newFairnessTenant(t, ctx, source, "tenant-a")
	b := newFairnessTenant(t, ctx, source, "tenant-b")
	for i := range 60 {
		if _, err := a.configMaps().Create(ctx, withStatusRecord(a.namespace, fmt.Sprintf("a-%02d", i), 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.configMaps().Create(ctx, withStatusRecord(b.namespace, "b", 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.StartMapperController(t, ctx, source, 40*time.Second)
	collectors := func(tn *fairnessTenant) dynamic.ResourceInterface {
		return tn.dyn.Resource(ctrlstatuscollector.CollectorsResource).Namespace(tn.namespace)
	}
	if _, err := collectors(a).Create(ctx, heavyCollector(a.namespace, "heavy"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := collectors(b).Create(ctx, sumCollector(b.namespace, "ready"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	summaries := b.dyn.Resource(ctrlstatuscollector.SummariesResource).Namespace(b.namespace)
	readyIs := func(want int) func() (bool, string) {
		return func() (bool, string) {
			s, err := summaries.Get(ctx, "ready", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			text, _, _ := unstructured.NestedString(s.Object, "results", "text")
			return text == fmt.Sprintf("ready=%d", want), text
		}
	}
	mapperEventually(t, ctx, 2*time.Minute, "B's first summary", readyIs(0))

	var took []time.Duration
	for i := 1; i <= 5; i++ {
		start := time.Now()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"{\"ready\":%d}"}}}`, contract.StatusRecordAnnotationPrefix+"east", i)
		if _, err := b.configMaps().Patch(ctx, "b", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		mapperEventually(t, ctx, 2*time.Minute, fmt.Sprintf("B's summary shows ready=%d", i), readyIs(i))
		took = append(took, time.Since(start))
	}
	t.Logf("B's summary followed B's status after %v", took)
	for i, d := range took {
		if d > 5*time.Second {
			t.Errorf("B's change %d reached its StatusSummary after %v, want within 5s", i+1, d)
		}
	}
	msg := waitCondition(t, ctx, a.dyn, ctrlstatuscollector.CollectorsResource, a.namespace, "heavy", controlv1alpha1.StatusCollectorDegraded,
		metav1.ConditionTrue, controlv1alpha1.ReasonBudgetExceeded, 3*time.Minute)
	t.Logf("A's collector: Degraded (BudgetExceeded): %s", msg)
}
