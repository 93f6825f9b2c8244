package view

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// liveSource is a Source of one plain cluster: a real kube-apiserver.
type liveSource struct{ dyn dynamic.Interface }

func (s liveSource) ResourceVersion(ctx context.Context, gvr schema.GroupVersionResource) (uint64, error) {
	l, err := s.dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(l.GetResourceVersion(), 10, 64)
}

func (s liveSource) Get(ctx context.Context, gvr schema.GroupVersionResource, _, namespace, name string) (*unstructured.Unstructured, error) {
	return s.dyn.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (s liveSource) ClusterResource(gvr schema.GroupVersionResource, _, namespace string) (dynamic.ResourceInterface, error) {
	return s.dyn.Resource(gvr).Namespace(namespace), nil
}

func (s liveSource) Resource(gvr schema.GroupVersionResource, namespace string) dynamic.ResourceInterface {
	return s.dyn.Resource(gvr).Namespace(namespace)
}

// sourceWithNamespace returns the admin's clients of cp, where it created the namespace ns.
func sourceWithNamespace(t *testing.T, ctx context.Context, cp *framework.ControlPlane) (dynamic.Interface, kubernetes.Interface) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return dyn, kube
}

// configMapRequests returns the source's apiserver_request_total on ConfigMaps by "VERB" and
// "VERB code".
func configMapRequests(t *testing.T, ctx context.Context, kube kubernetes.Interface) map[string]float64 {
	t.Helper()
	return sourceRequests(t, ctx, kube, "configmaps")
}

// sourceRequests returns the source's apiserver_request_total on resource by "VERB" and
// "VERB code".
func sourceRequests(t *testing.T, ctx context.Context, kube kubernetes.Interface, resource string) map[string]float64 {
	t.Helper()
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the source's metrics: %v", err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="`+resource+`"`) {
			continue
		}
		label := func(name string) string {
			_, v, _ := strings.Cut(line, name+`="`)
			v, _, _ = strings.Cut(v, `"`)
			return v
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			t.Fatalf("a sample that does not parse: %s", line)
		}
		out[label("verb")] += v
		out[label("verb")+" "+label("code")] += v
	}
	return out
}

// TestMarkWritesAtTheSource runs a location's finalizer writes through marksStorage against a
// real kube-apiserver and counts what reaches it (apiserver_request_total):
//   - with the cache's copy current, adding east's finalizer is one PATCH (no GET, no PUT);
//   - when another writer added its finalizer after the cache's copy (the store is not fed
//     that write), east's removal of its own finalizer is refused by the source (409: the
//     cached resourceVersion is the patch's precondition), made again on a fresh read, and
//     leaves the other writer's finalizer in place: PATCH 409, GET, PATCH.
func TestMarkWritesAtTheSource(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := startMarksFixture(t, ctx)
	kube, cms, store := f.kube, f.cms, f.store
	ms := &marksStorage{st: f.ss}
	east := contract.LocationFinalizer("east")
	setFinalizer := func(add bool) error {
		_, _, err := ms.Update(viewCtx("east", "ns"), "a", finalizerChange("east", add), nil, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
		return err
	}
	delta := func(before, after map[string]float64, keys ...string) map[string]float64 {
		out := map[string]float64{}
		for _, k := range keys {
			out[k] = after[k] - before[k]
		}
		return out
	}
	sourceFinalizers := func() []string {
		u, err := cms.Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u.GetFinalizers()
	}

	before := configMapRequests(t, ctx, kube)
	if err := setFinalizer(true); err != nil {
		t.Fatalf("east adding its finalizer: %v", err)
	}
	got := delta(before, configMapRequests(t, ctx, kube), "GET", "PUT", "PATCH")
	if got["PATCH"] != 1 || got["GET"] != 0 || got["PUT"] != 0 {
		t.Errorf("adding the finalizer with the cache's copy current sent %v to the source; want one PATCH, no GET, no PUT", got)
	}
	if fins := sourceFinalizers(); !slices.Equal(fins, []string{east}) {
		t.Fatalf("source finalizers %v, want east's", fins)
	}

	// The store has east's write (as its watch would bring it); another writer then adds its
	// finalizer, which the store does not get.
	withEast, err := cms.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Update(withEast); err != nil {
		t.Fatal(err)
	}
	other := withEast.DeepCopy()
	other.SetFinalizers(append(other.GetFinalizers(), "example.com/other"))
	if _, err := cms.Update(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	before = configMapRequests(t, ctx, kube)
	if err := setFinalizer(false); err != nil {
		t.Fatalf("east removing its finalizer: %v", err)
	}
	got = delta(before, configMapRequests(t, ctx, kube), "GET", "PUT", "PATCH", "PATCH 409")
	if got["PATCH"] != 2 || got["PATCH 409"] != 1 || got["GET"] != 1 || got["PUT"] != 0 {
		t.Errorf("removing the finalizer with a stale cache sent %v to the source; want a PATCH answered 409, a GET, a PATCH", got)
	}
	if fins := sourceFinalizers(); !slices.Equal(fins, []string{"example.com/other"}) {
		t.Fatalf("source finalizers %v after east removed its own, want the other writer's only", fins)
	}
}

// marksFixture is a real source with the ConfigMap ns/a assigned to east (created), and a
// statusStorage over a store that holds it as created.
type marksFixture struct {
	dyn     dynamic.Interface
	kube    kubernetes.Interface
	cms     dynamic.ResourceInterface
	created *unstructured.Unstructured
	store   *cache.ResourceStore
	ss      *statusStorage
}

// startMarksFixture starts a source control plane (stopped when t ends) and builds a
// marksFixture on it.
func startMarksFixture(t *testing.T, ctx context.Context) *marksFixture {
	t.Helper()
	cp := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source"})
	dyn, kube := sourceWithNamespace(t, ctx, cp)
	src := liveSource{dyn: dyn}
	cms := dyn.Resource(configMapsGVR).Namespace("ns")
	obj := cm("ns", "a", 0, "x", "east")
	unstructured.RemoveNestedField(obj.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(obj.Object, "metadata", "uid")
	created, err := cms.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	store := cache.NewResourceStore(configMapsGVR, configMapsInfo.GVK(), true, cache.StoreOptions{DefaultCluster: "root"})
	t.Cleanup(store.Close)
	if err := store.Replace([]interface{}{created}, created.GetResourceVersion()); err != nil {
		t.Fatal(err)
	}
	ss := &statusStorage{info: configMapsInfo, store: store, source: src, clusters: clusters{plain: "root"}, freshness: freshness{gvr: configMapsGVR, store: store, source: src}}
	return &marksFixture{dyn: dyn, kube: kube, cms: cms, created: created, store: store, ss: ss}
}

// finalizerChange is a write of location's finalizer through its view as a patch makes it:
// applied to the view's object it is given (keeping that object's resourceVersion), with the
// finalizer added (add) or removed.
func finalizerChange(location string, add bool) rest.UpdatedObjectInfo {
	own := contract.LocationFinalizer(location)
	return rest.DefaultUpdatedObjectInfo(nil, func(_ context.Context, _, old runtime.Object) (runtime.Object, error) {
		u := old.(*unstructured.Unstructured).DeepCopy()
		fins := slices.DeleteFunc(u.GetFinalizers(), func(f string) bool { return f == own })
		if add {
			fins = append(fins, own)
		}
		u.SetFinalizers(fins)
		return u, nil
	})
}
