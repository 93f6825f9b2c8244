package view

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

var cmGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// clusterTestCache is the views' Objects and Source over one real ResourceStore of configmaps; the source side is
// a fake dynamic client per logical cluster, which records the clusters written to.
type clusterTestCache struct {
	store   *cache.ResourceStore
	sources map[string]*dynamicfake.FakeDynamicClient
}

func (c *clusterTestCache) Discovered() bool { return true }

func (c *clusterTestCache) Resources() []source.ResourceInfo {
	return []source.ResourceInfo{{GVR: cmGVR, Kind: "ConfigMap", ListKind: "ConfigMapList", SingularName: "configmap", Namespaced: true,
		Verbs: []string{"get", "list", "watch", "update", "patch"}}}
}

func (c *clusterTestCache) Store(gvr schema.GroupVersionResource) (Store, bool) {
	return c.store, gvr == cmGVR
}

func (c *clusterTestCache) ResourceVersion(context.Context, schema.GroupVersionResource) (uint64, error) {
	return c.store.ResourceVersion(), nil
}

func (c *clusterTestCache) Get(ctx context.Context, gvr schema.GroupVersionResource, cluster, namespace, name string) (*unstructured.Unstructured, error) {
	ri, err := c.ClusterResource(gvr, cluster, namespace)
	if err != nil {
		return nil, err
	}
	return ri.Get(ctx, name, metav1.GetOptions{})
}

func (c *clusterTestCache) Resource(gvr schema.GroupVersionResource, namespace string) dynamic.ResourceInterface {
	panic("a view must not use the wildcard client for reads by name or writes")
}

func (c *clusterTestCache) ClusterResource(gvr schema.GroupVersionResource, cluster, namespace string) (dynamic.ResourceInterface, error) {
	src, ok := c.sources[cluster]
	if !ok {
		return nil, fmt.Errorf("no source for cluster %q", cluster)
	}
	return src.Resource(gvr).Namespace(namespace), nil
}

// clusterCM is a ConfigMap of cluster assigned to east, opted in to status write-back.
func clusterCM(cluster, ns, name string, rv int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{
			"name": name, "namespace": ns, "resourceVersion": fmt.Sprint(rv), "uid": cluster + "-" + ns + "-" + name,
			"annotations": map[string]interface{}{
				contract.AssignedLocationsAnnotation: `["east"]`,
				contract.ClusterAnnotation:           cluster,
				contract.StatusPolicyAnnotation:      contract.StatusPolicyReflect,
			},
		},
		"data": map[string]interface{}{"from": cluster},
	}}
}

// newClusterViews returns kcp-mode views over clusters c1, c2 (both holding ns/same, c1 also
// ns/only-c1) and c3 (ns/other).
func newClusterViews(t *testing.T) (*Views, *clusterTestCache) {
	t.Helper()
	return newViewsOf(t, clusterCM("c1", "ns", "same", 1), clusterCM("c2", "ns", "same", 2),
		clusterCM("c1", "ns", "only-c1", 3), clusterCM("c3", "ns3", "other", 4))
}

// newViewsOf returns kcp-mode views over a store and per-cluster fake sources holding objs
// (ConfigMaps made by clusterCM).
func newViewsOf(t *testing.T, objs ...*unstructured.Unstructured) (*Views, *clusterTestCache) {
	t.Helper()
	store := cache.NewResourceStore(cmGVR, cmGVR.GroupVersion().WithKind("ConfigMap"), true, cache.StoreOptions{ClusterFromAnnotation: true})
	t.Cleanup(store.Close)
	c := &clusterTestCache{store: store, sources: map[string]*dynamicfake.FakeDynamicClient{}}
	scheme := runtime.NewScheme()
	items := make([]interface{}, len(objs))
	for i, o := range objs {
		items[i] = o
		cl := o.GetAnnotations()[contract.ClusterAnnotation]
		if c.sources[cl] == nil {
			c.sources[cl] = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{cmGVR: "ConfigMapList"})
		}
		if _, err := c.sources[cl].Resource(cmGVR).Namespace(o.GetNamespace()).Create(context.Background(), o.DeepCopy(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Replace(items, fmt.Sprint(max(10, len(objs)+1))); err != nil {
		t.Fatal(err)
	}
	return New(c, c, Options{}), c
}

// serve runs one request inside east's view and returns the status code and the decoded body.
func serve(t *testing.T, v *Views, method, innerPath, body string) (int, map[string]interface{}) {
	t.Helper()
	req := httptest.NewRequest(method, "http://x"+contract.ViewPath("east", "")+innerPath, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/merge-patch+json")
	}
	req = req.WithContext(audit.WithAuditContext(req.Context()))
	p, _, _ := strings.Cut(innerPath, "?")
	rec := httptest.NewRecorder()
	v.ServeView(rec, req, "east", p)
	var out map[string]interface{}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s %s: %d %s: %v", method, innerPath, rec.Code, rec.Body.String(), err)
	}
	return rec.Code, out
}

func itemNames(list map[string]interface{}) string {
	var names []string
	items, _ := list["items"].([]interface{})
	for _, it := range items {
		md := it.(map[string]interface{})["metadata"].(map[string]interface{})
		names = append(names, md["annotations"].(map[string]interface{})[contract.ClusterAnnotation].(string)+"/"+md["name"].(string))
	}
	return strings.Join(names, " ")
}

// TestClusterPaths checks per-cluster and all-cluster reads of a kcp source's view.
func TestClusterPaths(t *testing.T) {
	v, _ := newClusterViews(t)
	for _, c := range []struct{ path, want string }{
		{"/api/v1/configmaps?resourceVersion=0", "c1/only-c1 c1/same c2/same c3/other"},
		{"/clusters/c1/api/v1/configmaps?resourceVersion=0", "c1/only-c1 c1/same"},
		{"/clusters/c2/api/v1/namespaces/ns/configmaps?resourceVersion=0", "c2/same"},
		{"/clusters/c9/api/v1/configmaps?resourceVersion=0", ""},
	} {
		code, list := serve(t, v, "GET", c.path, "")
		if code != http.StatusOK || itemNames(list) != c.want {
			t.Errorf("GET %s: %d %q, want %q", c.path, code, itemNames(list), c.want)
		}
	}
	// Discovery below a cluster path.
	if code, disc := serve(t, v, "GET", "/clusters/c1/api/v1", ""); code != http.StatusOK || !strings.Contains(fmt.Sprint(disc["resources"]), "configmaps") {
		t.Errorf("discovery of /clusters/c1/api/v1: %d %v", code, disc)
	}
	// Namespaces per cluster.
	_, nsList := serve(t, v, "GET", "/clusters/c3/api/v1/namespaces", "")
	if items, _ := nsList["items"].([]interface{}); len(items) != 1 || items[0].(map[string]interface{})["metadata"].(map[string]interface{})["name"] != "ns3" {
		t.Errorf("namespaces of c3: %v", nsList)
	}
	// GET by name in one cluster.
	code, obj := serve(t, v, "GET", "/clusters/c2/api/v1/namespaces/ns/configmaps/same?resourceVersion=0", "")
	if code != http.StatusOK || obj["data"].(map[string]interface{})["from"] != "c2" {
		t.Errorf("GET c2 same: %d %v", code, obj)
	}
	// A name held by one cluster is found on the base path, also with a consistent read.
	for _, rv := range []string{"?resourceVersion=0", ""} {
		code, obj = serve(t, v, "GET", "/api/v1/namespaces/ns/configmaps/only-c1"+rv, "")
		if code != http.StatusOK || obj["data"].(map[string]interface{})["from"] != "c1" {
			t.Errorf("GET only-c1%s: %d %v", rv, code, obj)
		}
	}
	if code, _ := serve(t, v, "GET", "/clusters/c2/api/v1/namespaces/ns/configmaps/only-c1", ""); code != http.StatusNotFound {
		t.Errorf("GET of c1's object in c2: %d, want 404", code)
	}
}

// TestAmbiguousNameOnBasePath checks the 400 of a GET and a status write by name on the
// all-clusters path that match objects of several clusters (docs/design.md), and that the
// per-cluster path writes the right cluster's source object.
func TestAmbiguousNameOnBasePath(t *testing.T) {
	v, c := newClusterViews(t)
	for _, rv := range []string{"?resourceVersion=0", ""} {
		code, st := serve(t, v, "GET", "/api/v1/namespaces/ns/configmaps/same"+rv, "")
		msg, _ := st["message"].(string)
		if code != http.StatusBadRequest || !strings.Contains(msg, "c1, c2") ||
			!strings.Contains(msg, contract.ViewPath("east", "<cluster>")+"/api/v1/namespaces/ns/configmaps/same") {
			t.Fatalf("ambiguous GET%s: %d %v", rv, code, st)
		}
		causes := st["details"].(map[string]interface{})["causes"].([]interface{})
		if len(causes) != 2 || causes[1].(map[string]interface{})["message"] != contract.ViewPath("east", "c2")+"/api/v1/namespaces/ns/configmaps/same" {
			t.Fatalf("causes %v", causes)
		}
	}
	patch := `{"status":{"phase":"seen"}}`
	if code, st := serve(t, v, "PATCH", "/api/v1/namespaces/ns/configmaps/same/status", patch); code != http.StatusBadRequest {
		t.Fatalf("ambiguous status write: %d %v", code, st)
	}
	code, st := serve(t, v, "PATCH", "/clusters/c2/api/v1/namespaces/ns/configmaps/same/status", patch)
	if code != http.StatusOK {
		t.Fatalf("status write in c2: %d %v", code, st)
	}
	if c := st["metadata"].(map[string]interface{})["annotations"].(map[string]interface{})[contract.ClusterAnnotation]; c != "c2" {
		t.Fatalf("written object shows cluster %v", c)
	}
	for cl, wantStatus := range map[string]bool{"c1": false, "c2": true} {
		u, err := c.sources[cl].Resource(cmGVR).Namespace("ns").Get(context.Background(), "same", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, has := u.Object["status"]; has != wantStatus {
			t.Fatalf("cluster %s: status written = %v, want %v", cl, has, wantStatus)
		}
	}
}

// TestClusterPathCannotLeaveLocation checks that a cluster prefix cannot be used to climb out of
// the view: non-canonical paths are 404.
func TestClusterPathCannotLeaveLocation(t *testing.T) {
	v, _ := newClusterViews(t)
	for _, p := range []string{"/clusters/c1/../../west/proxy/api/v1/configmaps", "/clusters/../api/v1/configmaps", "/clusters//api/v1/configmaps", "/clusters/C1/api/v1/configmaps"} {
		if code, st := serve(t, v, "GET", p, ""); code != http.StatusNotFound {
			t.Errorf("GET %s: %d %v, want 404", p, code, st)
		}
	}
}
