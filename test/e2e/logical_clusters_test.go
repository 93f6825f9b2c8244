package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
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
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
	"github.com/cluster-mapper/cluster-mapper/test/framework/kcpproxy"
)

// The data set of TestLogicalClusters: every cluster has the same namespaces and ConfigMap
// names, so each namespace/name exists in all clusters.
const (
	lcClusters   = 50
	lcNamespaces = 2  // per cluster
	lcPerNS      = 20 // ConfigMaps per namespace: 50*2*20 = 2,000
	lcWorkers    = 6  // concurrent creates (a 2-core machine is shared)
)

var (
	lcLocations   = []string{"east", "west"}
	namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// lcEnv is a source kube-apiserver behind kcpproxy (kcp's URL space), a mapper-apiserver in
// --source-mode=kcp reading it through /clusters/*, and one target per location.
type lcEnv struct {
	*mapperEnv
	proxy *kcpproxy.Server
	// proxyKubeconfig is the admin's kubeconfig of the proxy's wildcard endpoint.
	proxyKubeconfig string
	clusters        []string
	// cluster are dynamic clients of each logical cluster through the proxy.
	cluster map[string]dynamic.Interface
}

// TestLogicalClusters runs mapper-apiserver in kcp mode against a real
// kube-apiserver behind kcpproxy, with 50 logical clusters and 2,000 ConfigMaps whose
// namespace/name recurs in every cluster:
//   - each location's per-cluster views (/clusters/<c>) and all-cluster view equal the
//     label-selector twin read through the proxy per cluster, objects and resourceVersions,
//     every object carrying its kcp.io/cluster (once the mappers run, the twin follows the
//     deletion protocol, and a view's resourceVersion may be older than the source's where the
//     change was another location's finalizer, which no other view shows: lcDiff);
//   - a GET and a status write by name on the all-cluster view that match several clusters
//     answer 400 naming the clusters; a status write through /clusters/<c> lands in c only;
//   - two mappers (east with --namespace-mapping=prefixed, west with the default auto, which
//     must choose prefixed) bring both targets to 0 violations of
//     `mapper verify`, and view, twin and target stay equal through re-assignments and deletes
//     in several clusters.
func TestLogicalClusters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	env := startLogicalClustersEnv(t, ctx, lcOptions{})
	t.Logf("control planes, proxy and mapper-apiserver ready in %v", time.Since(start).Round(time.Millisecond))

	step := time.Now()
	env.createDataSet(t, ctx)
	t.Logf("created %d namespaces and %d ConfigMaps in %d logical clusters through the proxy in %v",
		lcClusters*lcNamespaces, lcClusters*lcNamespaces*lcPerNS, lcClusters, time.Since(step).Round(time.Millisecond))

	step = time.Now()
	env.viewsEqualTwin(t, ctx, "created", true)
	t.Logf("views equal the twin in %v", time.Since(step).Round(time.Millisecond))

	t.Run("AmbiguousGet", func(t *testing.T) { env.testAmbiguousGet(t, ctx) })
	t.Run("StatusWrite", func(t *testing.T) { env.testStatusWrite(t, ctx) })
	t.Run("Mappers", func(t *testing.T) { env.testMappers(t, ctx) })
	t.Logf("TestLogicalClusters took %v", time.Since(start).Round(time.Millisecond))
}

// lcOptions shape startLogicalClustersEnv; TestLogicalClusters takes the zero value.
type lcOptions struct {
	// clusters is how many logical clusters the env names (c00, c01, ...); 0 means lcClusters.
	clusters int
	// noTargets starts no target control planes, for a test that only reads views.
	noTargets bool
	// prepare runs once the source and the proxy are up and the cluster clients exist, before
	// mapper-apiserver starts (e.server is nil): what it creates is in mapper-apiserver's first
	// lists.
	prepare func(e *lcEnv)
}

// startLogicalClustersEnv starts the source, the proxy in front of it, mapper-apiserver in kcp
// mode on the proxy's wildcard endpoint, and a target per location (unless o.noTargets).
func startLogicalClustersEnv(t *testing.T, ctx context.Context, o lcOptions) *lcEnv {
	t.Helper()
	if o.clusters == 0 {
		o.clusters = lcClusters
	}
	opts := []framework.ControlPlaneOptions{{Name: "source"}}
	if !o.noTargets {
		shared := framework.StartEtcd(t)
		for _, l := range lcLocations {
			opts = append(opts, framework.ControlPlaneOptions{Name: "target-" + l, Etcd: shared})
		}
	}
	cps := framework.StartControlPlanes(t, opts...)
	source := cps[0]
	proxy, err := kcpproxy.Start(source.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	// Registered before mapper-apiserver's cleanup, so it runs after it: the proxy closes once
	// the watches through it are gone.
	t.Cleanup(proxy.Close)
	proxyKubeconfig := filepath.Join(t.TempDir(), "kcp-wildcard.kubeconfig")
	if err := framework.WriteKubeconfig(proxyKubeconfig, proxy.Config(kcpproxy.Wildcard)); err != nil {
		t.Fatal(err)
	}
	env := &lcEnv{
		mapperEnv: &mapperEnv{
			source: source, targets: map[string]*framework.ControlPlane{}, tgt: map[string]dynamic.Interface{},
			viewKubeconfig: map[string]string{}, targetKubeconfig: map[string]string{}, owner: t,
		},
		proxy:           proxy,
		proxyKubeconfig: proxyKubeconfig,
		cluster:         map[string]dynamic.Interface{},
	}
	if !o.noTargets {
		env.bin = framework.BuildBinary(t, "./cmd/mapper")
	}
	for i := 0; i < o.clusters; i++ {
		c := fmt.Sprintf("c%02d", i)
		env.clusters = append(env.clusters, c)
		d, err := dynamic.NewForConfig(proxy.Config(c))
		if err != nil {
			t.Fatal(err)
		}
		env.cluster[c] = d
	}
	if o.prepare != nil {
		o.prepare(env)
	}
	env.server = framework.StartMapperAPIServer(t, source,
		"--resources=configmaps,deployments.apps",
		"--source-mode=kcp",
		"--source-kubeconfig="+proxyKubeconfig,
		"--source-discovery-interval=1s",
		"--bookmark-interval=1s",
	)
	for i, l := range lcLocations {
		if !o.noTargets {
			env.targets[l] = cps[i+1]
			env.tgt[l] = dynamicClientFor(t, cps[i+1])
			env.targetKubeconfig[l] = cps[i+1].AdminKubeconfig()
		}
		env.viewKubeconfig[l] = source.Admin().KubeconfigFor(t, env.server.ViewURL(l), env.server.ServingCA.CertPEM)
	}
	return env
}

// lcNamespace and lcName name the test data.
func lcNamespace(i int) string { return fmt.Sprintf("ns-%d", i) }
func lcName(i int) string      { return fmt.Sprintf("cm-%02d", i) }

// createDataSet creates the namespaces and ConfigMaps of every cluster through the proxy, with
// lcWorkers concurrent requests; assignments are random (fixed seed) over the locations.
func (e *lcEnv) createDataSet(t *testing.T, ctx context.Context) {
	t.Helper()
	type item struct {
		cluster string
		obj     *unstructured.Unstructured
	}
	r := rand.New(rand.NewSource(11))
	var namespaces, configMaps []item
	for _, c := range e.clusters {
		for n := 0; n < lcNamespaces; n++ {
			ns := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]interface{}{"name": lcNamespace(n)}}}
			namespaces = append(namespaces, item{c, ns})
			for i := 0; i < lcPerNS; i++ {
				configMaps = append(configMaps, item{c, newConfigMap(lcNamespace(n), lcName(i), randomLocations(r, lcLocations)...)})
			}
		}
	}
	for _, batch := range [][]item{namespaces, configMaps} {
		work := make(chan item)
		errs := make(chan error, len(batch))
		var wg sync.WaitGroup
		for w := 0; w < lcWorkers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for it := range work {
					gvr := configMapsGVR
					if it.obj.GetKind() == "Namespace" {
						gvr = namespacesGVR
					}
					if _, err := e.cluster[it.cluster].Resource(gvr).Namespace(it.obj.GetNamespace()).Create(ctx, it.obj, metav1.CreateOptions{}); err != nil {
						errs <- fmt.Errorf("creating %s %s/%s in %s: %w", gvr.Resource, it.obj.GetNamespace(), it.obj.GetName(), it.cluster, err)
					}
				}
			}()
		}
		for _, it := range batch {
			work <- it
		}
		close(work)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
}

// lcObjects maps "cluster|namespace/name" to what a location's view shows of an object.
type lcObjects map[string]lcVersion

// lcVersion is what TestLogicalClusters compares of an object in a location's view: its
// resourceVersion, and what the location sees of it besides (seen: data, labels, whether it
// carries the location's finalizer and whether the view shows it deleting).
type lcVersion struct {
	rv   string
	seen string
}

// lcSeen is what location's view shows of an object besides its resourceVersion, as far as
// the writes of TestLogicalClusters go (no Customizations, no finalizers but locations'):
// data, labels, the location's own finalizer and the deletion shown.
func lcSeen(u *unstructured.Unstructured, ownFinalizer, deleting bool) string {
	data, _, _ := unstructured.NestedStringMap(u.Object, "data")
	return fmt.Sprintf("data=%v labels=%v finalizer=%t deleting=%t", data, u.GetLabels(), ownFinalizer, deleting)
}

// lcViewVersion is an object of location's view as lcObjects holds it.
func lcViewVersion(u *unstructured.Unstructured, location string) lcVersion {
	own := slices.Contains(locationFinalizers(u), location)
	return lcVersion{rv: u.GetResourceVersion(), seen: lcSeen(u, own, u.GetDeletionTimestamp() != nil)}
}

// lcSourceVersion is a source object as location's view should show it, and whether the view
// shows it at all (docs/views.md, "Deletion"): while it is assigned to the location (its twin
// label) or carries the location's finalizer. The view shows it deleting when it carries the
// location's finalizer and is no longer assigned there, or the source is deleting it (this
// test puts no finalizer but locations' on an object).
func lcSourceVersion(u *unstructured.Unstructured, location string) (lcVersion, bool) {
	_, assigned := u.GetLabels()[locationLabelPrefix+location]
	own := slices.Contains(locationFinalizers(u), location)
	deleting := own && (!assigned || u.GetDeletionTimestamp() != nil)
	return lcVersion{rv: u.GetResourceVersion(), seen: lcSeen(u, own, deleting)}, assigned || own
}

// lcKey is the key of u in lcObjects, by the cluster it carries in kcp.io/cluster.
func lcKey(u *unstructured.Unstructured) string {
	return u.GetAnnotations()[contract.ClusterAnnotation] + "|" + u.GetNamespace() + "/" + u.GetName()
}

// lcDiff describes how got, a location's view, differs from want, its twin, "" when it does
// not. Both must hold the same keys, and the view must show each object as the source has it.
// With exactRV every resourceVersion must be the source's; without, a view's may be older
// than the source's (never newer): a change the location cannot see, such as another
// location's finalizer added or removed by its mapper, moves the source object's
// resourceVersion and not the view's (docs/views.md, "Deletion" and "The resourceVersion a
// view shows").
func lcDiff(want, got lcObjects, exactRV bool) string {
	var missing, extra, differ []string
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			missing = append(missing, k+"@"+w.rv)
		case g.seen != w.seen:
			differ = append(differ, fmt.Sprintf("%s@%s shows %s, the source@%s has %s", k, g.rv, g.seen, w.rv, w.seen))
		case g.rv == w.rv:
		case exactRV || !lcOlder(g.rv, w.rv):
			differ = append(differ, fmt.Sprintf("%s at resourceVersion %s, the source's is %s", k, g.rv, w.rv))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, k+"@"+g.rv)
		}
	}
	if len(missing)+len(extra)+len(differ) == 0 {
		return ""
	}
	sort.Strings(missing)
	sort.Strings(extra)
	sort.Strings(differ)
	return fmt.Sprintf("missing %d %v, unexpected %d %v, different %d %v", len(missing), head(missing), len(extra), head(extra), len(differ), head(differ))
}

// lcOlder reports whether resourceVersion a is older than b. The proxy passes the backing
// kube-apiserver's resourceVersions, etcd revisions, so the test may compare them as numbers.
func lcOlder(a, b string) bool {
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	return errA == nil && errB == nil && x < y
}

// twin lists, through the proxy, each cluster's ConfigMaps and keeps those location's view
// shows (lcSourceVersion): the label-selector twin of the assignment, and the objects that
// carry the location's finalizer after leaving it.
func (e *lcEnv) twin(t *testing.T, ctx context.Context, location string) map[string]lcObjects {
	t.Helper()
	out := map[string]lcObjects{}
	for _, c := range e.clusters {
		list, err := e.cluster[c].Resource(configMapsGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("twin of %s in %s: %v", location, c, err)
		}
		out[c] = lcObjects{}
		for i := range list.Items {
			if v, shown := lcSourceVersion(&list.Items[i], location); shown {
				out[c][lcKey(&list.Items[i])] = v
			}
		}
	}
	return out
}

// view returns a dynamic client of location's view: all clusters when cluster is "", else the
// cluster's path.
func (e *lcEnv) view(t *testing.T, location, cluster string) dynamic.Interface {
	t.Helper()
	cfg := e.server.Config(e.source.Admin())
	cfg.Host = e.server.URL + contract.ViewPath(location, contract.ClusterName(cluster))
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// viewObjects lists ConfigMaps through location's view (all clusters, or one).
func (e *lcEnv) viewObjects(ctx context.Context, view dynamic.Interface, location string) (lcObjects, error) {
	list, err := view.Resource(configMapsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := lcObjects{}
	for i := range list.Items {
		out[lcKey(&list.Items[i])] = lcViewVersion(&list.Items[i], location)
	}
	return out, nil
}

// lcViewTimeout bounds how long a view may take to reach the source's state.
const lcViewTimeout = 90 * time.Second

// viewsEqualTwin waits until each location's all-cluster view and every per-cluster view equal
// the twin (lcDiff, with exactRV), reading the twin again each time: while mappers run, their
// finalizer writes keep changing what a view shows until the step's deletions are done.
func (e *lcEnv) viewsEqualTwin(t *testing.T, ctx context.Context, step string, exactRV bool) {
	t.Helper()
	for _, l := range lcLocations {
		all := e.view(t, l, "")
		var msg string
		var union, got lcObjects
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, lcViewTimeout, true, func(ctx context.Context) (bool, error) {
			twin := e.twin(t, ctx, l)
			union = lcObjects{}
			for _, objs := range twin {
				for k, v := range objs {
					union[k] = v
				}
			}
			var err error
			got, err = e.viewObjects(ctx, all, l)
			if err != nil {
				msg = err.Error()
				return false, nil
			}
			if d := lcDiff(union, got, exactRV); d != "" {
				msg = fmt.Sprintf("the all-cluster view does not equal the twin (%d objects): %s", len(union), d)
				return false, nil
			}
			for _, c := range e.clusters {
				got, err := e.viewObjects(ctx, e.view(t, l, c), l)
				if err != nil {
					msg = fmt.Sprintf("listing the view of cluster %s: %v", c, err)
					return false, nil
				}
				if d := lcDiff(twin[c], got, exactRV); d != "" {
					msg = fmt.Sprintf("the view of cluster %s differs from the twin: %s", c, d)
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("%s: views of %s: %s", step, l, msg)
		}
		older := 0
		for k, v := range union {
			if got[k].rv != v.rv {
				older++
			}
		}
		t.Logf("%s: %s's all-cluster view and %d per-cluster views equal the twin (%d objects, %d of them at a resourceVersion older than the source's)", step, l, len(e.clusters), len(union), older)
	}
}

// sharedName returns a namespace/name that location's twin holds in at least min clusters,
// and those clusters (sorted).
func (e *lcEnv) sharedName(t *testing.T, ctx context.Context, location string, min int) (string, string, []string) {
	t.Helper()
	byName := map[string][]string{}
	for c, objs := range e.twin(t, ctx, location) {
		for k := range objs {
			_, nsName, _ := strings.Cut(k, "|")
			byName[nsName] = append(byName[nsName], c)
		}
	}
	for _, n := range sets.List(sets.KeySet(byName)) {
		if len(byName[n]) >= min {
			ns, name := mapperSplitKey(n)
			return ns, name, sets.List(sets.New(byName[n]...))
		}
	}
	t.Fatalf("no namespace/name of %s is in %d clusters", location, min)
	return "", "", nil
}

// testAmbiguousGet: a GET by name on the all-cluster view that matches several clusters is a
// 400 naming them and the per-cluster path; the per-cluster path answers with that cluster's
// object.
func (e *lcEnv) testAmbiguousGet(t *testing.T, ctx context.Context) {
	ns, name, clusters := e.sharedName(t, ctx, "east", 3)
	_, err := e.view(t, "east", "").Resource(configMapsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if !apierrors.IsBadRequest(err) {
		t.Fatalf("GET %s/%s on the all-cluster view: %v, want 400", ns, name, err)
	}
	msg := err.Error()
	if !strings.Contains(msg, fmt.Sprintf("%d logical clusters", len(clusters))) || !strings.Contains(msg, contract.ViewPath("east", "<cluster>")) {
		t.Errorf("the 400 does not count %d clusters or name the per-cluster path: %s", len(clusters), msg)
	}
	for _, c := range clusters[:min(len(clusters), 20)] {
		if !strings.Contains(msg, c) {
			t.Errorf("the 400 does not name cluster %s: %s", c, msg)
		}
	}
	for _, c := range clusters[:3] {
		got, err := e.view(t, "east", c).Resource(configMapsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("GET %s/%s on the view of %s: %v", ns, name, c, err)
		}
		src, err := e.cluster[c].Resource(configMapsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetAnnotations()[contract.ClusterAnnotation] != c || got.GetUID() != src.GetUID() {
			t.Errorf("the view of %s answers the object of cluster %s (uid %s), want uid %s", c, got.GetAnnotations()[contract.ClusterAnnotation], got.GetUID(), src.GetUID())
		}
	}
}

// testStatusWrite: Deployment app/web exists in three clusters, assigned to east and opted
// in to status write-back. A status write on the all-cluster view is ambiguous (400); through
// /clusters/<c> it lands in c on the source (read through the proxy), not in the others.
func (e *lcEnv) testStatusWrite(t *testing.T, ctx context.Context) {
	clusters := e.clusters[1:4]
	for _, c := range clusters {
		if _, err := e.cluster[c].Resource(deploymentsGVR).Namespace(lcNamespace(0)).Create(ctx, reflectStatus(newDeployment(lcNamespace(0), "web", "east")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	target := clusters[1]
	var obj *unstructured.Unstructured
	mapperEventually(t, ctx, lcViewTimeout, "the Deployments reach the view", func() (bool, string) {
		list, err := e.view(t, "east", "").Resource(deploymentsGVR).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != len(clusters) {
			return false, fmt.Sprintf("%v %v", list, err)
		}
		obj, err = e.view(t, "east", target).Resource(deploymentsGVR).Namespace(lcNamespace(0)).Get(ctx, "web", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	want := map[string]interface{}{"observedGeneration": int64(1), "replicas": int64(1), "readyReplicas": int64(1)}
	obj.Object["status"] = want
	if _, err := e.view(t, "east", "").Resource(deploymentsGVR).Namespace(lcNamespace(0)).UpdateStatus(ctx, obj.DeepCopy(), metav1.UpdateOptions{}); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), fmt.Sprintf("%d logical clusters", len(clusters))) {
		t.Errorf("status write on the all-cluster view: %v, want a 400 naming %d clusters", err, len(clusters))
	}
	if _, err := e.view(t, "east", target).Resource(deploymentsGVR).Namespace(lcNamespace(0)).UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status write through the view of %s: %v", target, err)
	}
	for _, c := range clusters {
		src, err := e.cluster[c].Resource(deploymentsGVR).Namespace(lcNamespace(0)).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, _, _ := unstructured.NestedMap(src.Object, "status")
		if (c == target) != reflect.DeepEqual(got, want) {
			t.Errorf("cluster %s has .status %v after the write to %s (want %v there only)", c, got, target, want)
		}
	}
	// The mappers below mirror ConfigMaps only.
	for _, c := range clusters {
		if err := e.cluster[c].Resource(deploymentsGVR).Namespace(lcNamespace(0)).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mapperEventually(t, ctx, lcViewTimeout, "the Deployments leave the view", func() (bool, string) {
		list, err := e.view(t, "east", "").Resource(deploymentsGVR).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, fmt.Sprint(err)
	})
}

// mutate reads ns/name of cluster through the proxy, applies change and writes it back,
// retrying on conflicts.
func (e *lcEnv) mutate(t *testing.T, ctx context.Context, cluster, ns, name string, change func(*unstructured.Unstructured)) {
	t.Helper()
	client := e.cluster[cluster].Resource(configMapsGVR).Namespace(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(obj)
		_, err = client.Update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("updating %s/%s in %s: %v", ns, name, cluster, err)
	}
}

// lcMapperEnv runs east's mapper with client-go's streaming lists off and west's with them on
// (client-go's default), so that both ways a view informer starts are covered (docs/design.md,
// "Testing notes"). With streaming lists, client-go's reflector collects the initial events in
// a temporary store keyed by namespace/name before handing them to the informer's own store,
// so a mapper has to keep the clusters apart there too.
var lcMapperEnv = map[string][]string{
	"east": {"KUBE_FEATURE_WatchListClient=false"},
	"west": {"KUBE_FEATURE_WatchListClient=true"},
}

// lcMapperArgs: east's mapper names --namespace-mapping=prefixed; west's takes the default
// (auto), which must resolve to prefixed for a view of several logical clusters.
var lcMapperArgs = map[string][]string{
	"east": {"--namespace-mapping=prefixed"},
	"west": nil,
}

// testMappers: a mapper per location with prefixed namespaces (explicit or auto) converges (verify: 0
// violations); then re-assignments and deletes in several clusters converge again and the views
// still equal the twin.
func (e *lcEnv) testMappers(t *testing.T, ctx context.Context) {
	mappers := map[string]*mapperProc{}
	for _, l := range lcLocations {
		mappers[l] = e.startMapper(t, "mapper-"+l, l, lcMapperEnv[l], lcMapperArgs[l]...)
	}
	e.converge(t, ctx, "initial sync", lcLocations...)
	// West's mapper runs with the default --namespace-mapping=auto: on a fresh target and a
	// view of 50 clusters it must have chosen prefixed.
	if v, ok := mappers["west"].metric("mapper_namespace_mapping", `mapping="prefixed"`); !ok || v != 1 {
		t.Errorf("west's mapper (default --namespace-mapping=auto) did not choose prefixed: mapper_namespace_mapping{mapping=\"prefixed\"} = %v (found %v)", v, ok)
	}
	e.checkTargetNamespaces(t, ctx)

	// Re-assign and delete the same namespace/names in several clusters.
	changed := e.clusters[10:16]
	for _, c := range changed {
		for i := 0; i < 4; i++ {
			e.mutate(t, ctx, c, lcNamespace(0), lcName(i), func(o *unstructured.Unstructured) {
				locs, _ := contract.ParseLocations(o.GetAnnotations()[assignedAnnotation])
				switch {
				case len(locs) == 0:
					setAssignment(o, "east", "west")
				case len(locs) == 2:
					setAssignment(o)
				case locs[0] == "east":
					setAssignment(o, "west")
				default:
					setAssignment(o, "east")
				}
			})
		}
		for i := 4; i < 7; i++ {
			if err := e.cluster[c].Resource(configMapsGVR).Namespace(lcNamespace(1)).Delete(ctx, lcName(i), metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.viewsEqualTwin(t, ctx, "re-assigned and deleted", false)
	e.converge(t, ctx, "re-assigned and deleted", lcLocations...)
}

// checkTargetNamespaces: each location's target holds one prefixed namespace per source
// cluster and namespace that has objects there, recording its origin.
func (e *lcEnv) checkTargetNamespaces(t *testing.T, ctx context.Context) {
	t.Helper()
	for _, l := range lcLocations {
		want := sets.New[string]()
		for c, objs := range e.twin(t, ctx, l) {
			for k := range objs {
				_, nsName, _ := strings.Cut(k, "|")
				ns, _ := mapperSplitKey(nsName)
				want.Insert(c + "-" + ns)
			}
		}
		list, err := e.tgt[l].Resource(namespacesGVR).List(ctx, metav1.ListOptions{LabelSelector: contract.LocationLabel + "=" + l})
		if err != nil {
			t.Fatal(err)
		}
		got := sets.New[string]()
		for _, ns := range list.Items {
			got.Insert(ns.GetName())
			c, src := ns.GetAnnotations()[contract.SourceClusterAnnotation], ns.GetAnnotations()[contract.SourceNamespaceAnnotation]
			if ns.GetName() != c+"-"+src {
				t.Errorf("target namespace %s of %s records cluster %q namespace %q", ns.GetName(), l, c, src)
			}
		}
		if !got.Equal(want) {
			t.Errorf("target namespaces of %s: %s", l, diff(want, got))
		}
	}
}
