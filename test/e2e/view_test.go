package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

var viewLocations = []string{"east", "west", "north"}

// viewEnv is one source kube-apiserver with test data and a mapper-apiserver mirroring it.
type viewEnv struct {
	source *framework.ControlPlane
	server *framework.MapperAPIServer
	src    dynamic.Interface
	views  map[string]dynamic.Interface
	nss    []string
}

// historySize is the mapper-apiserver's watch history in these tests: small, so that a test
// can push a resourceVersion out of it.
const historySize = 300

func startViewEnv(t *testing.T, ctx context.Context) *viewEnv {
	t.Helper()
	source, src := startSource(t)
	createCRD(t, ctx, src, "widgets", "Widget")
	env := &viewEnv{source: source, src: src, views: map[string]dynamic.Interface{}, nss: []string{"team-a", "team-b", "team-c"}}

	// About 300 objects over ConfigMaps, Deployments and Widgets, in three namespaces, each
	// assigned to a random subset of the locations, some with malformed annotations.
	r := rand.New(rand.NewSource(1))
	for _, ns := range env.nss {
		ensureNamespace(t, ctx, src, ns)
		for i := 0; i < 40; i++ {
			env.create(t, ctx, configMapsGVR, newConfigMap(ns, fmt.Sprintf("cm-%02d", i), randomLocations(r, viewLocations)...))
		}
		for i := 0; i < 30; i++ {
			env.create(t, ctx, deploymentsGVR, newDeployment(ns, fmt.Sprintf("deploy-%02d", i), randomLocations(r, viewLocations)...))
		}
		for i := 0; i < 30; i++ {
			env.create(t, ctx, widgetsGVR, newWidget(widgetsGVR, "Widget", ns, fmt.Sprintf("widget-%02d", i), randomLocations(r, viewLocations)...))
		}
		for i, bad := range []string{`not json`, `{"east":true}`, `[1,2]`, `["East"]`, `[]`, `["` + strings.Repeat("x", 64) + `"]`, bigAssignment(5000)} {
			cm := newConfigMap(ns, fmt.Sprintf("malformed-%d", i))
			setMalformed(cm, bad)
			env.create(t, ctx, configMapsGVR, cm)
		}
	}

	env.server = framework.StartMapperAPIServer(t, source,
		"--resources=configmaps,deployments.apps,widgets.example.com,gadgets.example.com",
		fmt.Sprintf("--watch-history-size=%d", historySize),
		"--source-discovery-interval=1s",
		"--bookmark-interval=1s",
	)
	env.connectViews(t, viewLocations...)
	return env
}

// connectViews makes the admin's dynamic clients of the given locations' views.
func (e *viewEnv) connectViews(t *testing.T, locations ...string) {
	t.Helper()
	for _, l := range locations {
		v, err := dynamic.NewForConfig(e.server.ViewConfig(e.source.Admin(), l))
		if err != nil {
			t.Fatal(err)
		}
		e.views[l] = v
	}
}

// startSource starts a source control plane and returns it with an admin dynamic client
// without client-side throttling (the tests write hundreds of objects).
func startSource(t *testing.T) (*framework.ControlPlane, dynamic.Interface) {
	t.Helper()
	source := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source"})
	cfg := source.AdminConfig()
	cfg.QPS = -1
	src, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return source, src
}

// bigAssignment is an annotation value with n valid location names: more than an object may name.
func bigAssignment(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf(`"loc-%d"`, i)
	}
	return "[" + strings.Join(names, ",") + "]"
}

func (e *viewEnv) create(t *testing.T, ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	out, err := e.src.Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating %s %s/%s: %v", gvr.Resource, obj.GetNamespace(), obj.GetName(), err)
	}
	return out
}

// update reads the source object, applies mutate and writes it back.
func (e *viewEnv) update(t *testing.T, ctx context.Context, gvr schema.GroupVersionResource, ns, name string, mutate func(*unstructured.Unstructured)) *unstructured.Unstructured {
	t.Helper()
	obj, err := e.src.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	mutate(obj)
	out, err := e.src.Resource(gvr).Namespace(ns).Update(ctx, obj, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("updating %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	return out
}

// TestViews proves the read path of location views against a real source kube-apiserver, a
// real mapper-apiserver process and the built kubectl.
func TestViews(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := startViewEnv(t, ctx)

	t.Run("lists match ground truth", func(t *testing.T) { testListsMatchGroundTruth(t, ctx, env) })
	t.Run("get", func(t *testing.T) { testGet(t, ctx, env) })
	t.Run("writes are refused", func(t *testing.T) { testWritesRefused(t, ctx, env) })
	t.Run("paging", func(t *testing.T) { testPaging(t, ctx, env) })
	for _, watchList := range []bool{true, false} {
		t.Run(fmt.Sprintf("informer WatchListClient=%v", watchList), func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, watchList)
			testInformer(t, ctx, env, watchList)
		})
	}
	t.Run("streaming list", func(t *testing.T) { testStreamingList(t, ctx, env) })
	t.Run("periodic bookmarks", func(t *testing.T) { testPeriodicBookmarks(t, ctx, env) })
	t.Run("resume watch", func(t *testing.T) { testResumeWatch(t, ctx, env) })
	t.Run("kubectl", func(t *testing.T) { testKubectl(t, ctx, env) })
	t.Run("new CRD", func(t *testing.T) { testNewCRD(t, ctx, env) })
	t.Run("no ghost objects", func(t *testing.T) { testNoGhostObjects(t, ctx, env) })
	// Last: it restarts the server.
	t.Run("informer relists after 410", func(t *testing.T) { testInformerRelist(t, ctx, env) })
}

func testListsMatchGroundTruth(t *testing.T, ctx context.Context, env *viewEnv) {
	total := 0
	for _, loc := range viewLocations {
		for _, gvr := range []schema.GroupVersionResource{configMapsGVR, deploymentsGVR, widgetsGVR} {
			for _, ns := range append([]string{""}, env.nss...) {
				want := groundTruth(t, ctx, env.src, gvr, loc, ns)
				got := viewKeys(t, ctx, env.views[loc], gvr, ns)
				if !want.Equal(got) {
					t.Errorf("%s %s in namespace %q: %s", loc, gvr.Resource, ns, diff(want, got))
				}
				if ns == "" {
					total += got.Len()
				}
			}
		}
	}
	if total == 0 {
		t.Fatal("no view holds any object: the test data assigns none")
	}
	t.Logf("%d assigned objects across %d locations match the source's label-selector lists", total, len(viewLocations))

	// Selectors apply on top of the location, as on kube-apiserver: east's objects that are
	// also assigned to west (a label selector), and east's objects in team-a (a field selector).
	both := groundTruth(t, ctx, env.src, configMapsGVR, "east", "").Intersection(groundTruth(t, ctx, env.src, configMapsGVR, "west", ""))
	list, err := env.views["east"].Resource(configMapsGVR).List(ctx, metav1.ListOptions{LabelSelector: locationLabelPrefix + "west"})
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(list.Items); !both.Equal(got) {
		t.Errorf("east's configmaps with label selector %swest: %s", locationLabelPrefix, diff(both, got))
	}
	list, err = env.views["east"].Resource(configMapsGVR).List(ctx, metav1.ListOptions{FieldSelector: "metadata.namespace=team-a"})
	if err != nil {
		t.Fatal(err)
	}
	if want, got := groundTruth(t, ctx, env.src, configMapsGVR, "east", "team-a"), keysOf(list.Items); !want.Equal(got) {
		t.Errorf("east's configmaps with field selector metadata.namespace=team-a: %s", diff(want, got))
	}
	_, err = env.views["east"].Resource(configMapsGVR).List(ctx, metav1.ListOptions{FieldSelector: "data.key=x"})
	if !apierrors.IsBadRequest(err) {
		t.Errorf("a field selector on an unsupported field: want 400, got %v", err)
	}

	// Every malformed annotation was counted, and the server kept serving.
	malformed := env.server.Metric(t, env.source.Admin(), "mapper_apiserver_malformed_assignments_total", `resource="configmaps"`)
	if want := float64(7 * len(env.nss)); malformed < want {
		t.Errorf("mapper_apiserver_malformed_assignments_total{resource=configmaps} = %v, want at least %v", malformed, want)
	}

	// /api/v1/namespaces inside a view lists the namespaces that hold the location's objects.
	list, err = env.views["east"].Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing namespaces through the view: %v", err)
	}
	got := sets.New[string]()
	for _, ns := range list.Items {
		got.Insert(ns.GetName())
	}
	want := sets.New[string]()
	for _, gvr := range []schema.GroupVersionResource{configMapsGVR, deploymentsGVR, widgetsGVR} {
		for k := range groundTruth(t, ctx, env.src, gvr, "east", "") {
			want.Insert(strings.SplitN(k, "/", 2)[0])
		}
	}
	if !want.Equal(got) {
		t.Errorf("namespaces of east: %s", diff(want, got))
	}
}

func testGet(t *testing.T, ctx context.Context, env *viewEnv) {
	env.create(t, ctx, configMapsGVR, newConfigMap("team-a", "get-east", "east"))
	env.create(t, ctx, configMapsGVR, newConfigMap("team-a", "get-west", "west"))
	// resourceVersion "" is a consistent read: the object just written is there at once.
	got, err := env.views["east"].Resource(configMapsGVR).Namespace("team-a").Get(ctx, "get-east", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("GET of an east object through east's view right after writing it: %v", err)
	}
	if got.GetAnnotations()[assignedAnnotation] != `["east"]` {
		t.Errorf("the view's object lost its annotation: %v", got.GetAnnotations())
	}
	_, err = env.views["east"].Resource(configMapsGVR).Namespace("team-a").Get(ctx, "get-west", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("GET of a west-only object through east's view: want 404, got %v", err)
	}
	_, err = env.views["east"].Resource(configMapsGVR).Namespace("team-a").Get(ctx, "does-not-exist", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("GET of an absent object: want 404, got %v", err)
	}
	// A location name that is not a DNS-1123 label is a 404 that says why.
	bad, err := dynamic.NewForConfig(env.server.ViewConfig(env.source.Admin(), "Not_A_Label"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Resource(configMapsGVR).List(ctx, metav1.ListOptions{})
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "DNS-1123") {
		t.Errorf("view of an invalid location name: want 404 naming DNS-1123, got %v", err)
	}
}

func testWritesRefused(t *testing.T, ctx context.Context, env *viewEnv) {
	view := env.views["east"].Resource(configMapsGVR).Namespace("team-a")
	before, err := env.src.Resource(configMapsGVR).Namespace("team-a").Get(ctx, "get-east", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Create and delete are never allowed: 405 saying views are read-only. An update or patch
	// of the object itself may only add or remove the location's own finalizer (docs/views.md,
	// "Writes"): one that changes data is a 405 naming what it changes and the finalizer.
	readOnly := map[string]error{}
	_, readOnly["create"] = view.Create(ctx, newConfigMap("team-a", "created-through-view", "east"), metav1.CreateOptions{})
	readOnly["delete"] = view.Delete(ctx, "get-east", metav1.DeleteOptions{})
	for verb, err := range readOnly {
		if !apierrors.IsMethodNotSupported(err) || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("%s through a view: want 405 saying views are read-only, got %v", verb, err)
		}
	}
	changesData := map[string]error{}
	upd := before.DeepCopy()
	upd.Object["data"] = map[string]interface{}{"key": "changed-through-view"}
	_, changesData["update"] = view.Update(ctx, upd, metav1.UpdateOptions{})
	_, changesData["patch"] = view.Patch(ctx, "get-east", "application/merge-patch+json", []byte(`{"data":{"key":"patched"}}`), metav1.PatchOptions{})
	for verb, err := range changesData {
		if !apierrors.IsMethodNotSupported(err) || !strings.Contains(err.Error(), "changes data") || !strings.Contains(err.Error(), "locations.mapper.kcp.io/east") {
			t.Errorf("%s of data through a view: want 405 saying it changes data and that only the finalizer locations.mapper.kcp.io/east may change, got %v", verb, err)
		}
	}
	after, err := env.src.Resource(configMapsGVR).Namespace("team-a").Get(ctx, "get-east", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the source object is gone after writes through the view: %v", err)
	}
	if after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("a refused write changed the source object: resourceVersion %s → %s", before.GetResourceVersion(), after.GetResourceVersion())
	}
	if _, err := env.src.Resource(configMapsGVR).Namespace("team-a").Get(ctx, "created-through-view", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a create through the view reached the source: %v", err)
	}
}

func testPaging(t *testing.T, ctx context.Context, env *viewEnv) {
	want := groundTruth(t, ctx, env.src, configMapsGVR, "west", "")
	got := sets.New[string]()
	opts := metav1.ListOptions{Limit: 7}
	pages, rv := 0, ""
	for {
		list, err := env.views["west"].Resource(configMapsGVR).List(ctx, opts)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		pages++
		if rv == "" {
			rv = list.GetResourceVersion()
		} else if list.GetResourceVersion() != rv {
			t.Errorf("page %d served at resourceVersion %s, the first at %s", pages, list.GetResourceVersion(), rv)
		}
		if len(list.Items) > 7 {
			t.Errorf("page %d has %d items, limit 7", pages, len(list.Items))
		}
		for _, k := range keysOf(list.Items).UnsortedList() {
			if got.Has(k) {
				t.Errorf("%s on two pages", k)
			}
			got.Insert(k)
		}
		if list.GetContinue() == "" {
			break
		}
		opts.Continue = list.GetContinue()
	}
	if !want.Equal(got) {
		t.Errorf("paged list of west: %s", diff(want, got))
	}
	if pages < 2 {
		t.Errorf("only %d page(s) for %d objects at limit 7", pages, got.Len())
	}
	_, err := env.views["west"].Resource(configMapsGVR).List(ctx, metav1.ListOptions{Limit: 5, Continue: "not-a-token"})
	if !apierrors.IsBadRequest(err) {
		t.Errorf("list with a garbage continue token: want 400, got %v", err)
	}
}

// eventLog records the informer's notifications per object key.
type eventLog struct {
	mu     sync.Mutex
	events []string // "ADDED ns/name", ...
}

func (l *eventLog) add(typ string, obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u := obj.(*unstructured.Unstructured)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, typ+" "+u.GetNamespace()+"/"+u.GetName())
}

func (l *eventLog) since(i int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events[i:]...)
}

func (l *eventLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

func testInformer(t *testing.T, ctx context.Context, env *viewEnv, watchList bool) {
	const loc = "east"
	ictx, stop := context.WithCancel(ctx)
	defer stop()
	factory := dynamicinformer.NewDynamicSharedInformerFactory(env.views[loc], 0)
	informer := factory.ForResource(configMapsGVR).Informer()
	log := &eventLog{}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { log.add("ADDED", obj) },
		UpdateFunc: func(_, obj interface{}) { log.add("MODIFIED", obj) },
		DeleteFunc: func(obj interface{}) { log.add("DELETED", obj) },
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ictx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the informer on the view did not sync")
	}
	storeKeys := func() sets.Set[string] {
		out := sets.New[string]()
		for _, k := range informer.GetStore().ListKeys() {
			out.Insert(k)
		}
		return out
	}
	converge := func(step string) {
		t.Helper()
		var want, got sets.Set[string]
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
			want = groundTruth(t, ctx, env.src, configMapsGVR, loc, "")
			got = storeKeys()
			return want.Equal(got), nil
		})
		if err != nil {
			t.Fatalf("after %s the informer's store differs from ground truth: %s", step, diff(want, got))
		}
	}
	converge("the initial sync")

	ns := "team-b"
	name := fmt.Sprintf("informer-%v", watchList)
	key := ns + "/" + name
	// expect checks that after a step the store converged and the step's event arrived; mark is
	// the event count taken before the step.
	expect := func(step, want string, mark int) {
		t.Helper()
		converge(step)
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			for _, e := range log.since(mark) {
				if e == want+" "+key {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Errorf("after %s: want a %s event for %s, got %v", step, want, key, log.since(mark))
		}
	}
	// Each step is checked before the next one runs (its event is searched from the mark).
	mark := log.len()
	env.create(t, ctx, configMapsGVR, newConfigMap(ns, name))
	converge("creating an unassigned object")
	for _, e := range log.since(mark) {
		if strings.HasSuffix(e, " "+key) {
			t.Errorf("an unassigned object produced %q", e)
		}
	}
	steps := []struct {
		name   string
		mutate func(*unstructured.Unstructured)
		want   string
	}{
		{"assign to east", func(u *unstructured.Unstructured) { setAssignment(u, "east") }, "ADDED"},
		{"edit the data", func(u *unstructured.Unstructured) { u.Object["data"] = map[string]interface{}{"key": "edited"} }, "MODIFIED"},
		{"re-assign to west", func(u *unstructured.Unstructured) { setAssignment(u, "west") }, "DELETED"},
		{"assign to east and west", func(u *unstructured.Unstructured) { setAssignment(u, "west", "east") }, "ADDED"},
		{"a malformed annotation", func(u *unstructured.Unstructured) { setMalformed(u, `["east",`) }, "DELETED"},
		{"assign to east again", func(u *unstructured.Unstructured) { setAssignment(u, "east") }, "ADDED"},
		{"unassign", func(u *unstructured.Unstructured) { setAssignment(u) }, "DELETED"},
		{"assign to east once more", func(u *unstructured.Unstructured) { setAssignment(u, "east") }, "ADDED"},
	}
	for _, s := range steps {
		mark := log.len()
		env.update(t, ctx, configMapsGVR, ns, name, s.mutate)
		expect(s.name, s.want, mark)
	}
	mark = log.len()
	if err := env.src.Resource(configMapsGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("deleting the object in the source", "DELETED", mark)
}

func testResumeWatch(t *testing.T, ctx context.Context, env *viewEnv) {
	// A second replica, started before the list: a watch resumes on it from a resourceVersion
	// the first replica returned, as resourceVersions are the source's.
	replica := framework.StartMapperAPIServer(t, env.source, env.server.ExtraArgs...)
	replicaView, err := dynamic.NewForConfig(replica.ViewConfig(env.source.Admin(), "north"))
	if err != nil {
		t.Fatal(err)
	}
	// A replica's history begins at its first list, so the watch resumes from a state written
	// after the replica started (a replica that restarted later answers 410, as kube-apiserver
	// does after a restart, and the client relists).
	view := env.views["north"].Resource(configMapsGVR)
	env.create(t, ctx, configMapsGVR, newConfigMap("team-c", "resume-0", "north"))
	var rv0 string
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := view.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		rv0 = list.GetResourceVersion()
		return keysOf(list.Items).Has("team-c/resume-0"), nil
	})
	if err != nil {
		t.Fatalf("the view did not show resume-0: %v", err)
	}
	// Changes while "disconnected": two new north objects, one edit, one unassignment; plus
	// changes elsewhere that north must not see.
	env.create(t, ctx, configMapsGVR, newConfigMap("team-c", "resume-1", "north"))
	env.create(t, ctx, configMapsGVR, newConfigMap("team-c", "resume-2", "north", "east"))
	env.create(t, ctx, configMapsGVR, newConfigMap("team-c", "resume-other", "west"))
	env.update(t, ctx, configMapsGVR, "team-c", "resume-1", func(u *unstructured.Unstructured) { u.Object["data"] = map[string]interface{}{"k": "v2"} })
	env.update(t, ctx, configMapsGVR, "team-c", "resume-2", func(u *unstructured.Unstructured) { setAssignment(u, "east") })
	want := []string{"ADDED team-c/resume-1", "ADDED team-c/resume-2", "MODIFIED team-c/resume-1", "DELETED team-c/resume-2"}

	w, err := replicaView.Resource(configMapsGVR).Watch(ctx, metav1.ListOptions{ResourceVersion: rv0})
	if err != nil {
		t.Fatalf("resuming a watch at %s on the other replica: %v", rv0, err)
	}
	defer w.Stop()
	var got []string
	timeout := time.After(10 * time.Second)
	for len(got) < len(want) {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %v", got)
			}
			if e.Type == watch.Bookmark {
				continue
			}
			u := e.Object.(*unstructured.Unstructured)
			got = append(got, string(e.Type)+" "+u.GetNamespace()+"/"+u.GetName())
		case <-timeout:
			t.Fatalf("resumed watch: got %v, want %v", got, want)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("resumed watch: got %v, want exactly %v", got, want)
	}
	select {
	case e := <-w.ResultChan():
		if e.Type != watch.Bookmark {
			t.Errorf("an event beyond the missed ones: %v", e.Type)
		}
	case <-time.After(500 * time.Millisecond):
	}

	// Push rv0 out of the history: a resume from it answers 410 Gone.
	for i := 0; i < historySize+20; i++ {
		env.update(t, ctx, configMapsGVR, "team-c", "resume-1", func(u *unstructured.Unstructured) {
			u.Object["data"] = map[string]interface{}{"k": fmt.Sprint(i)}
		})
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		w, err := view.Watch(ctx, metav1.ListOptions{ResourceVersion: rv0})
		if err == nil {
			// The error may also arrive as the watch's first event.
			defer w.Stop()
			select {
			case e := <-w.ResultChan():
				if e.Type == watch.Error {
					st, _ := e.Object.(*metav1.Status)
					return st != nil && st.Code == http.StatusGone, nil
				}
			case <-time.After(time.Second):
			}
			return false, nil
		}
		return apierrors.IsResourceExpired(err) || apierrors.IsGone(err), nil
	})
	if err != nil {
		t.Errorf("a watch from a resourceVersion older than the history did not answer 410 Gone")
	}
}

func testKubectl(t *testing.T, ctx context.Context, env *viewEnv) {
	admin := env.source.Admin()
	kc := admin.KubeconfigFor(t, env.server.ViewURL("east"), env.server.ServingCA.CertPEM)
	want := groundTruth(t, ctx, env.src, deploymentsGVR, "east", "team-a")

	out, err := framework.RunKubectl(t, kc, "get", "deployments", "-n", "team-a", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	got := sets.New[string]()
	for _, line := range strings.Fields(out) {
		got.Insert("team-a/" + strings.TrimPrefix(line, "deployment.apps/"))
	}
	if !want.Equal(got) {
		t.Errorf("kubectl get deployments -o name: %s", diff(want, got))
	}

	out, err = framework.RunKubectl(t, kc, "get", "deployments", "-A")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "NAMESPACE") || !strings.Contains(out, "AGE") {
		t.Errorf("kubectl get deployments -A printed no table header:\n%s", out)
	}
	for _, k := range sets.List(groundTruth(t, ctx, env.src, deploymentsGVR, "east", "")) {
		if !strings.Contains(out, strings.SplitN(k, "/", 2)[1]) {
			t.Errorf("kubectl get deployments -A lacks %s:\n%s", k, out)
			break
		}
	}

	some := sets.List(want)[0]
	out, err = framework.RunKubectl(t, kc, "get", "deployment", "-n", "team-a", strings.SplitN(some, "/", 2)[1], "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "kind: Deployment") || !strings.Contains(out, assignedAnnotation) {
		t.Errorf("kubectl get -o yaml:\n%s", out)
	}

	out, err = framework.RunKubectl(t, kc, "get", "configmaps", "-A", "--chunk-size=2", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if n, w := len(strings.Fields(out)), groundTruth(t, ctx, env.src, configMapsGVR, "east", "").Len(); n != w {
		t.Errorf("kubectl get --chunk-size=2 listed %d configmaps, want %d", n, w)
	}

	testKubectlWatch(t, ctx, env, kc)

	// A custom resource prints the columns of its CRD (additionalPrinterColumns), as on the source.
	out, err = framework.RunKubectl(t, kc, "get", "widgets", "-n", "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "SIZE") {
		t.Errorf("kubectl get widgets lacks the CRD's printer column SIZE:\n%s", out)
	}
	rows := map[string]string{} // name → SIZE cell
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			rows[f[0]] = f[1]
		}
	}
	for _, k := range sets.List(groundTruth(t, ctx, env.src, widgetsGVR, "east", "team-a")) {
		name := strings.SplitN(k, "/", 2)[1]
		if rows[name] != fmt.Sprint(len(name)) {
			t.Errorf("kubectl get widgets: row %q has SIZE %q, want %d:\n%s", name, rows[name], len(name), out)
		}
	}

	// kubectl get locations against the server's own URL shows the counts.
	serverKC := admin.KubeconfigFor(t, env.server.URL, env.server.ServingCA.CertPEM)
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		// east has no SyncTarget: listed only on request (docs/locations.md).
		out, err = framework.RunKubectl(t, serverKC, "get", "locations", "--field-selector", "status.registered=false")
		return err == nil && strings.Contains(out, "east") && strings.Contains(out, "OBJECTS"), nil
	})
	if err != nil {
		t.Fatalf("kubectl get locations:\n%s", out)
	}
	total := 0
	for _, gvr := range []schema.GroupVersionResource{configMapsGVR, deploymentsGVR, widgetsGVR} {
		total += groundTruth(t, ctx, env.src, gvr, "east", "").Len()
	}
	lines := strings.Split(out, "\n")
	objects := slices.Index(strings.Fields(lines[0]), "OBJECTS")
	if objects < 0 {
		t.Fatalf("kubectl get locations has no OBJECTS column:\n%s", out)
	}
	found := false
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) > objects && f[0] == "east" {
			found = true
			if f[objects] != fmt.Sprint(total) {
				t.Errorf("kubectl get locations shows %s objects for east, the source assigns %d:\n%s", f[objects], total, out)
			}
		}
	}
	if !found {
		t.Errorf("kubectl get locations has no row for east:\n%s", out)
	}
}

// testKubectlWatch: `kubectl get -w --watch-only` prints the changes made while it watches, and
// only those. --watch-only leaves out the initial list (which --output-watch-events alone prints
// as ADDED, so an object written before the watch started would pass for a delivered event), so
// every line is an event of the watch: the ADDED or MODIFIED of a write made while kubectl
// watches, then the DELETED when the object loses its assignment. kubectl gives no sign of
// when its watch is open, so the test writes the object again until an event of it arrives.
func testKubectlWatch(t *testing.T, ctx context.Context, env *viewEnv, kc string) {
	const name = "kubectl-watch"
	before := groundTruth(t, ctx, env.src, configMapsGVR, "east", "team-c")
	if before.Len() == 0 {
		t.Fatal("team-c has no configmaps of east: the test could not tell a watch from a list")
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	lines := make(chan string, 100)
	go func() {
		_ = framework.StreamKubectl(t, wctx, kc, lines, "get", "configmaps", "-n", "team-c", "-w", "--watch-only", "--output-watch-events")
	}()
	var printed []string
	// next returns the next line naming the object; it fails on a line naming an object that
	// existed before the watch (the initial list), and when wait passes without a line.
	next := func(wait time.Duration) (string, bool) {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		for {
			select {
			case l := <-lines:
				printed = append(printed, l)
				f := strings.Fields(l)
				if len(f) < 2 {
					continue
				}
				if before.Has("team-c/" + f[1]) {
					t.Fatalf("kubectl get -w --watch-only printed %s, which existed before the watch (the initial list):\n%s", f[1], strings.Join(printed, "\n"))
				}
				if f[1] == name {
					return f[0], true
				}
			case <-timer.C:
				return "", false
			case <-wctx.Done():
				t.Fatalf("kubectl get -w --watch-only printed no event of %s for writes made while it watched; it printed:\n%s", name, strings.Join(printed, "\n"))
			}
		}
	}

	env.create(t, ctx, configMapsGVR, newConfigMap("team-c", name, "east"))
	event, ok := next(3 * time.Second)
	for i := 1; !ok; i++ {
		// kubectl may have listed after the create: change the object until an event shows.
		env.update(t, ctx, configMapsGVR, "team-c", name, func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, fmt.Sprint(i), "data", "round")
		})
		event, ok = next(3 * time.Second)
	}
	if event != "ADDED" && event != "MODIFIED" {
		t.Fatalf("kubectl get -w printed %s for the new object, want ADDED or MODIFIED:\n%s", event, strings.Join(printed, "\n"))
	}
	env.update(t, ctx, configMapsGVR, "team-c", name, func(u *unstructured.Unstructured) { setAssignment(u, "west") })
	for {
		if event, ok = next(30 * time.Second); !ok {
			t.Fatalf("kubectl get -w printed no DELETED for %s after it lost its assignment to east:\n%s", name, strings.Join(printed, "\n"))
		}
		if event == "DELETED" {
			break
		}
	}
}

func testNewCRD(t *testing.T, ctx context.Context, env *viewEnv) {
	createCRD(t, ctx, env.src, "gadgets", "Gadget")
	env.create(t, ctx, gadgetsGVR, newWidget(gadgetsGVR, "Gadget", "team-a", "gadget-1", "east"))
	env.create(t, ctx, gadgetsGVR, newWidget(gadgetsGVR, "Gadget", "team-a", "gadget-2", "west"))
	var got sets.Set[string]
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := env.views["east"].Resource(gadgetsGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		got = keysOf(list.Items)
		return got.Equal(sets.New("team-a/gadget-1")), nil
	})
	if err != nil {
		t.Fatalf("a CRD created after start-up is not served by the view: got %v", got)
	}
	kc := env.source.Admin().KubeconfigFor(t, env.server.ViewURL("east"), env.server.ServingCA.CertPEM)
	out, err := framework.RunKubectl(t, kc, "api-resources")
	if err != nil || !strings.Contains(out, "gadgets") {
		t.Errorf("kubectl api-resources on the view lacks gadgets (%v):\n%s", err, out)
	}

	// Deleting the CRD ends the watches on it cleanly and drops it from the view's discovery.
	w, err := env.views["east"].Resource(gadgetsGVR).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := env.src.Resource(crdGVR).Delete(ctx, "gadgets.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ended := time.After(30 * time.Second)
	for open := true; open; {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				open = false
			} else if e.Type == watch.Error {
				t.Errorf("the watch on a removed resource ended with an error: %v", e.Object)
			}
		case <-ended:
			t.Fatal("the watch on gadgets did not end after the CRD was deleted")
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		out, err = framework.RunKubectl(t, kc, "api-resources")
		return err == nil && !strings.Contains(out, "gadgets"), nil
	})
	if err != nil {
		t.Errorf("gadgets stayed in the view's discovery after the CRD was deleted:\n%s", out)
	}
}

func testStreamingList(t *testing.T, ctx context.Context, env *viewEnv) {
	// sendInitialEvents=true (KEP-3157): ADDED for the current state, then the bookmark that
	// ends the initial events, then live changes.
	want := groundTruth(t, ctx, env.src, deploymentsGVR, "west", "")
	send := true
	w, err := env.views["west"].Resource(deploymentsGVR).Watch(ctx, metav1.ListOptions{
		SendInitialEvents:    &send,
		AllowWatchBookmarks:  true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
	})
	if err != nil {
		t.Fatalf("streaming list: %v", err)
	}
	defer w.Stop()
	got := sets.New[string]()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("streaming list closed before the initial-events-end bookmark")
			}
			u, _ := e.Object.(*unstructured.Unstructured)
			switch e.Type {
			case watch.Added:
				got.Insert(u.GetNamespace() + "/" + u.GetName())
				continue
			case watch.Bookmark:
				if u.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
					continue
				}
				if u.GetResourceVersion() == "" {
					t.Error("the initial-events-end bookmark has no resourceVersion")
				}
			default:
				t.Fatalf("unexpected %s event during the initial events", e.Type)
			}
		case <-timeout:
			t.Fatalf("no initial-events-end bookmark; got %d ADDED", got.Len())
		}
		break
	}
	if !want.Equal(got) {
		t.Errorf("initial events of west's deployments: %s", diff(want, got))
	}
	env.create(t, ctx, deploymentsGVR, newDeployment("team-b", "streamed-later", "west"))
	for {
		select {
		case e := <-w.ResultChan():
			if e.Type == watch.Bookmark {
				continue
			}
			if u := e.Object.(*unstructured.Unstructured); e.Type != watch.Added || u.GetName() != "streamed-later" {
				t.Errorf("after the initial events: got %s %s, want ADDED streamed-later", e.Type, u.GetName())
			}
		case <-time.After(10 * time.Second):
			t.Error("no live event after the initial events")
		}
		return
	}
}

func testPeriodicBookmarks(t *testing.T, ctx context.Context, env *viewEnv) {
	// Two watches of west's configmaps that allow bookmarks get a periodic BOOKMARK
	// (--bookmark-interval=1s) once the resource moves on, also by a write west does not see:
	// at the resource's resourceVersion, with the kind and apiVersion and nothing else. The
	// cache hands every watcher at a resourceVersion the same BOOKMARK object, encoded once.
	views := env.views["west"].Resource(configMapsGVR)
	list, err := views.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var watches []watch.Interface
	for i := 0; i < 2; i++ {
		w, err := views.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion(), AllowWatchBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		watches = append(watches, w)
	}
	moved := env.create(t, ctx, configMapsGVR, newConfigMap("team-a", "bookmark-mover", "east"))
	movedRV, err := strconv.ParseUint(moved.GetResourceVersion(), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range watches {
		timeout := time.After(20 * time.Second)
	events:
		for {
			select {
			case e, ok := <-w.ResultChan():
				if !ok {
					t.Fatalf("watch %d closed before a BOOKMARK at or after %d", i, movedRV)
				}
				if e.Type != watch.Bookmark {
					continue // a write of another test to west's configmaps
				}
				u := e.Object.(*unstructured.Unstructured)
				rv, err := strconv.ParseUint(u.GetResourceVersion(), 10, 64)
				if err != nil || rv < movedRV {
					continue // before the write: the resource had not moved on for this watch yet
				}
				want := map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]interface{}{"resourceVersion": u.GetResourceVersion()}}
				if !reflect.DeepEqual(u.Object, want) {
					t.Errorf("watch %d: BOOKMARK %v, want %v", i, u.Object, want)
				}
				break events
			case <-timeout:
				t.Fatalf("watch %d: no BOOKMARK at or after %d within 20s", i, movedRV)
			}
		}
	}
}

func testInformerRelist(t *testing.T, ctx context.Context, env *viewEnv) {
	// An informer whose watch cannot be resumed (the restarted server's history begins after
	// the informer's resourceVersion) gets 410, relists on its own and converges.
	const loc = "west"
	ictx, stop := context.WithCancel(ctx)
	defer stop()
	factory := dynamicinformer.NewDynamicSharedInformerFactory(env.views[loc], 0)
	informer := factory.ForResource(configMapsGVR).Informer()
	factory.Start(ictx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	if err := env.server.Process.Stop(); err != nil {
		t.Fatal(err)
	}
	env.create(t, ctx, configMapsGVR, newConfigMap("team-a", "while-down", loc))
	env.update(t, ctx, configMapsGVR, "team-a", "cm-00", func(u *unstructured.Unstructured) { setAssignment(u, loc, "north") })
	for _, k := range sets.List(groundTruth(t, ctx, env.src, configMapsGVR, loc, "team-b"))[:2] {
		env.update(t, ctx, configMapsGVR, "team-b", strings.SplitN(k, "/", 2)[1], func(u *unstructured.Unstructured) { setAssignment(u) })
	}
	env.server.Restart(t)
	var want, got sets.Set[string]
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		want = groundTruth(t, ctx, env.src, configMapsGVR, loc, "")
		got = sets.New(informer.GetStore().ListKeys()...)
		return want.Equal(got), nil
	})
	if err != nil {
		t.Fatalf("the informer did not converge after the server restarted: %s", diff(want, got))
	}
}
