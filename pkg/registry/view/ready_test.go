package view

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// oneStoreCache is the views' Objects and Source over one ResourceStore (no source: reads with resourceVersion "0").
type oneStoreCache struct {
	info  source.ResourceInfo
	store *cache.ResourceStore
}

func (c *oneStoreCache) Discovered() bool { return true }

func (c *oneStoreCache) Resources() []source.ResourceInfo { return []source.ResourceInfo{c.info} }
func (c *oneStoreCache) Store(gvr schema.GroupVersionResource) (Store, bool) {
	return c.store, gvr == c.info.GVR
}
func (c *oneStoreCache) ResourceVersion(context.Context, schema.GroupVersionResource) (uint64, error) {
	return c.store.ResourceVersion(), nil
}
func (c *oneStoreCache) Get(context.Context, schema.GroupVersionResource, string, string, string) (*unstructured.Unstructured, error) {
	panic("not used")
}
func (c *oneStoreCache) ClusterResource(schema.GroupVersionResource, string, string) (dynamic.ResourceInterface, error) {
	panic("not used")
}
func (c *oneStoreCache) Resource(schema.GroupVersionResource, string) dynamic.ResourceInterface {
	return nil
}

// TestUnsyncedResourceIsNotServedEmpty checks the wiring of the sync gate: a list, get and
// watch of a resource whose first sync has not finished answer 429 with a Retry-After header
// after the freshness timeout (never 200 with no items), and the first sync lets them through.
func TestUnsyncedResourceIsNotServedEmpty(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	info := source.ResourceInfo{GVR: gvr, Kind: "ConfigMap", ListKind: "ConfigMapList", SingularName: "configmap", Namespaced: true, Verbs: []string{"get", "list", "watch"}}
	store := cache.NewResourceStore(gvr, info.GVK(), true, cache.StoreOptions{DefaultCluster: "root"})
	defer store.Close()
	c := &oneStoreCache{info: info, store: store}
	v := New(c, c, Options{FreshnessTimeout: 200 * time.Millisecond})

	serve := func(path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/apis/mapper.kcp.io/v1alpha1/locations/east/proxy/"+path, nil)
		rec := httptest.NewRecorder()
		v.ServeView(rec, req, "east", req.URL.Path[len("/apis/mapper.kcp.io/v1alpha1/locations/east/proxy/"):])
		return rec
	}
	for _, path := range []string{
		"api/v1/configmaps?resourceVersion=0",
		"api/v1/namespaces/ns/configmaps?resourceVersion=0",
		"api/v1/namespaces/ns/configmaps/a?resourceVersion=0",
		"api/v1/configmaps?watch=true&resourceVersion=0&timeoutSeconds=1",
		"api/v1/namespaces?resourceVersion=0",
	} {
		rec := serve(path)
		if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("%s before the first sync: %d Retry-After=%q %s", path, rec.Code, rec.Header().Get("Retry-After"), rec.Body.String())
		}
	}

	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace("ns")
	u.SetName("a")
	u.SetResourceVersion("7")
	u.SetAnnotations(map[string]string{contract.AssignedLocationsAnnotation: `["east"]`})
	if err := store.Replace([]interface{}{u}, "7"); err != nil {
		t.Fatal(err)
	}
	rec := serve("api/v1/configmaps?resourceVersion=0")
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &list) != nil || len(list.Items) != 1 {
		t.Fatalf("after the first sync: %d %s", rec.Code, rec.Body.String())
	}
}
