package view

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// aggregatedAccept is the Accept header of an aggregated discovery request (KEP-3352), as
// client-go sends it first.
const aggregatedAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// fakeResources is the views' Objects (and Source) whose mirrored resources a test sets; nothing else of it is used
// by discovery.
type fakeResources struct {
	Source

	mu    sync.Mutex
	infos []source.ResourceInfo
}

func (f *fakeResources) Discovered() bool { return true }

func (f *fakeResources) Resources() []source.ResourceInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]source.ResourceInfo{}, f.infos...)
}

func (f *fakeResources) Store(schema.GroupVersionResource) (Store, bool) {
	return nil, false
}

func (f *fakeResources) set(infos ...source.ResourceInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.infos = infos
}

var (
	discoveryConfigMaps = source.ResourceInfo{
		GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", ListKind: "ConfigMapList",
		SingularName: "configmap", Namespaced: true, ShortNames: []string{"cm"}, Verbs: []string{"create", "get", "list", "watch"},
	}
	discoveryDeployments = source.ResourceInfo{
		GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Kind: "Deployment", ListKind: "DeploymentList",
		SingularName: "deployment", Namespaced: true, ShortNames: []string{"deploy"}, Categories: []string{"all"},
		Verbs: []string{"create", "delete", "get", "list", "watch"}, HasStatus: true,
	}
	discoveryWidgets = source.ResourceInfo{
		GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, Kind: "Widget", ListKind: "WidgetList",
		SingularName: "widget", Namespaced: true, ShortNames: []string{"wd"}, Categories: []string{"things"},
		Verbs: []string{"get", "list", "watch"},
	}
	// discoveryClusterThings is a cluster-scoped resource at a second version of example.com.
	discoveryClusterThings = source.ResourceInfo{
		GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1beta1", Resource: "clusterthings"}, Kind: "ClusterThing",
		ListKind: "ClusterThingList", SingularName: "clusterthing", Verbs: []string{"get", "list", "watch"},
	}
)

// startDiscoveryServer serves the view of location "east" over res at the returned URL, the
// way connect.go hands requests to ServeView.
func startDiscoveryServer(t *testing.T, res *fakeResources) string {
	t.Helper()
	views := New(res, res, Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		views.ServeView(w, req, "east", req.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// get GETs url with accept (none if empty) and header (name, value pairs) and returns the
// response and its body; it fails the test if the request fails.
func get(t *testing.T, url, accept string, header ...string) (*http.Response, []byte) {
	t.Helper()
	resp, body, err := fetch(url, accept, header...)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// fetch is get without a test, for other goroutines than the test's.
func fetch(url, accept string, header ...string) (*http.Response, []byte, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// getJSON GETs url as plain JSON, expects 200 and decodes the body into out.
func getJSON(t *testing.T, url string, out interface{}) {
	t.Helper()
	resp, body := get(t, url, "application/json")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, body)
	}
}

// getAggregated GETs url asking for aggregated discovery, expects 200 with the aggregated
// media type, and returns the document and its ETag.
func getAggregated(t *testing.T, url string) (apidiscoveryv2.APIGroupDiscoveryList, string) {
	t.Helper()
	resp, body := get(t, url, aggregatedAccept)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s (aggregated): %d %s", url, resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, "g=apidiscovery.k8s.io") || !strings.Contains(ct, "v=v2") {
		t.Fatalf("GET %s (aggregated): Content-Type %q is not aggregated discovery; body %s", url, ct, body)
	}
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("GET %s (aggregated): %v in %s", url, err, body)
	}
	return list, resp.Header.Get("ETag")
}

// findAggregated returns the aggregated entry of gv's resource, if listed.
func findAggregated(list apidiscoveryv2.APIGroupDiscoveryList, gv schema.GroupVersion, resource string) (apidiscoveryv2.APIResourceDiscovery, bool) {
	for _, g := range list.Items {
		if g.Name != gv.Group {
			continue
		}
		for _, v := range g.Versions {
			if v.Version != gv.Version {
				continue
			}
			for _, r := range v.Resources {
				if r.Resource == resource {
					return r, true
				}
			}
		}
	}
	return apidiscoveryv2.APIResourceDiscovery{}, false
}

// TestDiscoveryLegacy checks the unaggregated documents: /api, /api/v1 (with the view's own
// namespaces), /apis, /apis/<g>, /apis/<g>/<v>, and 404/405 for what a view does not serve.
func TestDiscoveryLegacy(t *testing.T) {
	res := &fakeResources{}
	res.set(discoveryConfigMaps, discoveryDeployments, discoveryWidgets, discoveryClusterThings)
	base := startDiscoveryServer(t, res)

	var versions metav1.APIVersions
	getJSON(t, base+"/api", &versions)
	if !reflect.DeepEqual(versions.Versions, []string{"v1"}) || versions.Kind != "APIVersions" {
		t.Errorf("/api = %+v, want kind APIVersions with versions [v1]", versions)
	}

	var core metav1.APIResourceList
	getJSON(t, base+"/api/v1", &core)
	wantCore := []metav1.APIResource{
		{Name: "configmaps", SingularName: "configmap", Namespaced: true, Kind: "ConfigMap", Verbs: metav1.Verbs{"get", "list", "watch"}, ShortNames: []string{"cm"}},
		{Name: "configmaps/status", Namespaced: true, Kind: "ConfigMap", Verbs: metav1.Verbs{"get", "patch", "update"}},
		{Name: "namespaces", SingularName: "namespace", Kind: "Namespace", Verbs: metav1.Verbs{"get", "list"}, ShortNames: []string{"ns"}},
	}
	if core.GroupVersion != "v1" || !reflect.DeepEqual(core.APIResources, wantCore) {
		t.Errorf("/api/v1 = %+v\nwant resources %+v", core, wantCore)
	}

	var groups metav1.APIGroupList
	getJSON(t, base+"/apis", &groups)
	var names []string
	for _, g := range groups.Groups {
		names = append(names, g.Name)
	}
	if !reflect.DeepEqual(names, []string{"apps", "example.com"}) {
		t.Errorf("/apis lists groups %v, want [apps example.com]", names)
	}

	var example metav1.APIGroup
	getJSON(t, base+"/apis/example.com", &example)
	wantVersions := []metav1.GroupVersionForDiscovery{{GroupVersion: "example.com/v1", Version: "v1"}, {GroupVersion: "example.com/v1beta1", Version: "v1beta1"}}
	if !reflect.DeepEqual(example.Versions, wantVersions) || example.PreferredVersion != wantVersions[0] {
		t.Errorf("/apis/example.com = %+v, want versions %v with v1 preferred", example, wantVersions)
	}
	example.TypeMeta = metav1.TypeMeta{} // the group list's entries carry none
	if !reflect.DeepEqual(groups.Groups[1], example) {
		t.Errorf("/apis and /apis/example.com disagree: %+v vs %+v", groups.Groups[1], example)
	}

	var apps metav1.APIResourceList
	getJSON(t, base+"/apis/apps/v1", &apps)
	wantApps := []metav1.APIResource{
		{Name: "deployments", SingularName: "deployment", Namespaced: true, Kind: "Deployment", Verbs: metav1.Verbs{"get", "list", "watch"}, ShortNames: []string{"deploy"}, Categories: []string{"all"}},
		{Name: "deployments/status", Namespaced: true, Kind: "Deployment", Verbs: metav1.Verbs{"get", "patch", "update"}},
	}
	if apps.GroupVersion != "apps/v1" || !reflect.DeepEqual(apps.APIResources, wantApps) {
		t.Errorf("/apis/apps/v1 = %+v\nwant resources %+v", apps, wantApps)
	}
	var beta metav1.APIResourceList
	getJSON(t, base+"/apis/example.com/v1beta1", &beta)
	if len(beta.APIResources) != 2 || beta.APIResources[0].Name != "clusterthings" || beta.APIResources[0].Namespaced {
		t.Errorf("/apis/example.com/v1beta1 = %+v, want the cluster-scoped clusterthings and its status", beta)
	}

	for _, p := range []string{"/apis/nope", "/apis/apps/v2", "/api/v2", "/apis/example.com/v1/extra/x", "/version"} {
		resp, body := get(t, base+p, "application/json")
		var st metav1.Status
		if err := json.Unmarshal(body, &st); err != nil || resp.StatusCode != http.StatusNotFound || st.Kind != "Status" || st.Code != http.StatusNotFound {
			t.Errorf("GET %s = %d %s, want a 404 Status", p, resp.StatusCode, body)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/apis", strings.NewReader("{}"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(string(body), `"kind":"Status"`) {
		t.Errorf("POST /apis = %d %s, want a 405 Status", resp.StatusCode, body)
	}
}

// TestDiscoveryAggregated checks aggregated discovery (apidiscovery.k8s.io/v2) of /api and
// /apis, its agreement with the unaggregated documents, and its ETag.
func TestDiscoveryAggregated(t *testing.T) {
	res := &fakeResources{}
	res.set(discoveryConfigMaps, discoveryDeployments, discoveryWidgets)
	base := startDiscoveryServer(t, res)

	legacy, _ := getAggregated(t, base+"/api")
	if len(legacy.Items) != 1 || legacy.Items[0].Name != "" || len(legacy.Items[0].Versions) != 1 || legacy.Items[0].Versions[0].Version != "v1" {
		t.Fatalf("aggregated /api = %+v, want the core group with v1 only", legacy)
	}
	ns, ok := findAggregated(legacy, schema.GroupVersion{Version: "v1"}, "namespaces")
	if !ok || ns.Scope != apidiscoveryv2.ScopeCluster || !reflect.DeepEqual(ns.Verbs, []string{"get", "list"}) || ns.ResponseKind.Kind != "Namespace" || len(ns.Subresources) != 0 {
		t.Errorf("aggregated /api namespaces = %+v (found %v), want cluster-scoped Namespace with get, list", ns, ok)
	}

	apis, etag := getAggregated(t, base+"/apis")
	if len(apis.Items) != 2 || apis.Items[0].Name != "apps" || apis.Items[1].Name != "example.com" {
		t.Fatalf("aggregated /apis = %+v, want groups apps, example.com", apis)
	}
	d, ok := findAggregated(apis, schema.GroupVersion{Group: "apps", Version: "v1"}, "deployments")
	want := apidiscoveryv2.APIResourceDiscovery{
		Resource: "deployments", ResponseKind: &metav1.GroupVersionKind{Kind: "Deployment"}, Scope: apidiscoveryv2.ScopeNamespace,
		SingularResource: "deployment", Verbs: []string{"get", "list", "watch"}, ShortNames: []string{"deploy"}, Categories: []string{"all"},
		Subresources: []apidiscoveryv2.APISubresourceDiscovery{{Subresource: "status", ResponseKind: &metav1.GroupVersionKind{Kind: "Deployment"}, Verbs: []string{"get", "patch", "update"}}},
	}
	if !ok || !reflect.DeepEqual(d, want) {
		t.Errorf("aggregated deployments = %+v\nwant %+v", d, want)
	}
	if apis.Items[0].Versions[0].Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent {
		t.Errorf("apps/v1 freshness = %q, want Current", apis.Items[0].Versions[0].Freshness)
	}

	// The ETag of an unchanged document answers 304 Not Modified.
	if etag == "" {
		t.Fatal("aggregated /apis has no ETag")
	}
	if resp, body := get(t, base+"/apis", aggregatedAccept, "If-None-Match", etag); resp.StatusCode != http.StatusNotModified {
		t.Errorf("aggregated /apis with If-None-Match of the current ETag = %d %s, want 304", resp.StatusCode, body)
	}
}

// TestDiscoveryFollowsResources adds and removes a mirrored resource and checks that both
// forms of discovery follow, and that the aggregated document's ETag changes.
func TestDiscoveryFollowsResources(t *testing.T) {
	res := &fakeResources{}
	res.set(discoveryConfigMaps, discoveryDeployments)
	base := startDiscoveryServer(t, res)
	widgets := schema.GroupVersion{Group: "example.com", Version: "v1"}

	before, etagBefore := getAggregated(t, base+"/apis")
	if _, ok := findAggregated(before, widgets, "widgets"); ok {
		t.Fatal("widgets listed before they are mirrored")
	}
	if resp, _ := get(t, base+"/apis/example.com/v1", ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/apis/example.com/v1 before widgets are mirrored = %d, want 404", resp.StatusCode)
	}

	res.set(discoveryConfigMaps, discoveryDeployments, discoveryWidgets)
	after, etagAfter := getAggregated(t, base+"/apis")
	w, ok := findAggregated(after, widgets, "widgets")
	if !ok || w.ResponseKind.Kind != "Widget" || !reflect.DeepEqual(w.ShortNames, []string{"wd"}) || !reflect.DeepEqual(w.Categories, []string{"things"}) {
		t.Errorf("aggregated widgets after adding = %+v (found %v)", w, ok)
	}
	if etagAfter == etagBefore {
		t.Errorf("the aggregated ETag stayed %s although widgets were added", etagAfter)
	}
	var list metav1.APIResourceList
	getJSON(t, base+"/apis/example.com/v1", &list)
	if len(list.APIResources) != 2 || list.APIResources[0].Name != "widgets" || list.APIResources[1].Name != "widgets/status" {
		t.Errorf("/apis/example.com/v1 after adding = %+v", list)
	}
	var groups metav1.APIGroupList
	getJSON(t, base+"/apis", &groups)
	if len(groups.Groups) != 2 || groups.Groups[1].Name != "example.com" {
		t.Errorf("/apis after adding = %+v, want apps and example.com", groups)
	}

	// A resource whose names change at the source (a CRD's short names) changes too.
	renamed := discoveryWidgets
	renamed.ShortNames = []string{"wdg"}
	res.set(discoveryConfigMaps, discoveryDeployments, renamed)
	after, _ = getAggregated(t, base+"/apis")
	if w, _ := findAggregated(after, widgets, "widgets"); !reflect.DeepEqual(w.ShortNames, []string{"wdg"}) {
		t.Errorf("aggregated widgets after their short names changed = %+v, want short names [wdg]", w)
	}
	getJSON(t, base+"/apis/example.com/v1", &list)
	if !reflect.DeepEqual(list.APIResources[0].ShortNames, []string{"wdg"}) {
		t.Errorf("/apis/example.com/v1 after the short names changed = %+v, want short names [wdg]", list)
	}

	res.set(discoveryConfigMaps, discoveryDeployments)
	removed, etagRemoved := getAggregated(t, base+"/apis")
	if _, ok := findAggregated(removed, widgets, "widgets"); ok || len(removed.Items) != 1 {
		t.Errorf("aggregated /apis after removing widgets = %+v, want apps only", removed)
	}
	if etagRemoved != etagBefore {
		t.Errorf("the aggregated ETag after removing widgets = %s, want the original %s (same content)", etagRemoved, etagBefore)
	}
	for _, p := range []string{"/apis/example.com", "/apis/example.com/v1"} {
		if resp, body := get(t, base+p, ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s after removing widgets = %d %s, want 404", p, resp.StatusCode, body)
		}
	}
	getJSON(t, base+"/apis", &groups)
	if len(groups.Groups) != 1 || groups.Groups[0].Name != "apps" {
		t.Errorf("/apis after removing = %+v, want apps only", groups)
	}

	// A core resource follows too, in /api/v1 and in aggregated /api.
	res.set(discoveryDeployments)
	legacy, _ := getAggregated(t, base+"/api")
	if _, ok := findAggregated(legacy, schema.GroupVersion{Version: "v1"}, "configmaps"); ok {
		t.Errorf("aggregated /api still lists configmaps after they were removed: %+v", legacy)
	}
	var core metav1.APIResourceList
	getJSON(t, base+"/api/v1", &core)
	if len(core.APIResources) != 1 || core.APIResources[0].Name != "namespaces" {
		t.Errorf("/api/v1 after removing configmaps = %+v, want namespaces only", core)
	}
}

// countingTransport counts the requests of a client by path.
type countingTransport struct {
	next  http.RoundTripper
	n     atomic.Int32
	mu    sync.Mutex
	paths []string
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	c.mu.Lock()
	c.paths = append(c.paths, req.URL.Path)
	c.mu.Unlock()
	return c.next.RoundTrip(req)
}

// TestDiscoveryClientGo runs client-go's discovery against a view: one refresh takes two
// requests (aggregated /api and /apis), and its result equals the unaggregated documents.
func TestDiscoveryClientGo(t *testing.T) {
	res := &fakeResources{}
	res.set(discoveryConfigMaps, discoveryDeployments, discoveryWidgets, discoveryClusterThings)
	base := startDiscoveryServer(t, res)

	counter := &countingTransport{}
	cfg := &rest.Config{Host: base, WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
		counter.next = rt
		return counter
	}}
	client, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	groups, lists, err := client.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	if n := counter.n.Load(); n > 2 {
		t.Errorf("one discovery refresh made %d requests (%v), want at most 2", n, counter.paths)
	}
	if len(groups) != 3 {
		t.Errorf("client-go found %d groups, want 3 (core, apps, example.com)", len(groups))
	}

	// What client-go read from the aggregated documents is what the unaggregated ones say.
	got := map[string][]string{}
	for _, l := range lists {
		for _, r := range l.APIResources {
			got[l.GroupVersion] = append(got[l.GroupVersion], describeResource(r))
		}
	}
	want := map[string][]string{}
	for _, p := range []string{"/api/v1", "/apis/apps/v1", "/apis/example.com/v1", "/apis/example.com/v1beta1"} {
		var l metav1.APIResourceList
		getJSON(t, base+p, &l)
		for _, r := range l.APIResources {
			want[l.GroupVersion] = append(want[l.GroupVersion], describeResource(r))
		}
	}
	for gv := range got {
		sort.Strings(got[gv])
		sort.Strings(want[gv])
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("client-go's resources from aggregated discovery:\n%v\nthe unaggregated documents:\n%v", got, want)
	}
}

// describeResource renders what discovery says of a resource, without the fields the two forms
// spell differently (singularName of subresources, group and version of the response kind).
func describeResource(r metav1.APIResource) string {
	b, _ := json.Marshal([]interface{}{r.Name, r.Namespaced, r.Kind, r.Verbs, r.ShortNames, r.Categories})
	return string(b)
}

// BenchmarkDiscoveryAggregated measures one aggregated /apis request of a view over 200
// mirrored resources in 20 groups, unchanged between requests: the cost of checking the
// cache's resources on every discovery request, plus serving the cached document.
func BenchmarkDiscoveryAggregated(b *testing.B) {
	res := &fakeResources{}
	var infos []source.ResourceInfo
	for g := 0; g < 20; g++ {
		for r := 0; r < 10; r++ {
			info := discoveryWidgets
			info.GVR = schema.GroupVersionResource{Group: fmt.Sprintf("group%02d.example.com", g), Version: "v1", Resource: fmt.Sprintf("things%02d", r)}
			infos = append(infos, info)
		}
	}
	res.set(infos...)
	views := New(res, res, Options{})
	req := httptest.NewRequest(http.MethodGet, "/apis", nil)
	req.Header.Set("Accept", aggregatedAccept)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		w := httptest.NewRecorder()
		views.ServeView(w, req, "east", "/apis")
		if w.Code != http.StatusOK {
			b.Fatalf("aggregated /apis: %d %s", w.Code, w.Body)
		}
	}
}

// TestDiscoveryConcurrentChanges serves discovery from several goroutines while the mirrored
// resources keep changing (run with -race): every answer is a complete document of one of the
// two states.
func TestDiscoveryConcurrentChanges(t *testing.T) {
	res := &fakeResources{}
	res.set(discoveryConfigMaps, discoveryDeployments)
	base := startDiscoveryServer(t, res)
	var wg sync.WaitGroup
	errs := make(chan string, 100)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 30; j++ {
				resp, body, err := fetch(base+"/apis", aggregatedAccept)
				if err != nil {
					errs <- err.Error()
					return
				}
				var list apidiscoveryv2.APIGroupDiscoveryList
				if err := json.Unmarshal(body, &list); resp.StatusCode != http.StatusOK || err != nil || (len(list.Items) != 1 && len(list.Items) != 2) {
					errs <- fmt.Sprintf("aggregated /apis: %d %s", resp.StatusCode, body)
					return
				}
				if resp, body, err := fetch(base+"/api/v1", "application/json"); err != nil || resp.StatusCode != http.StatusOK {
					errs <- fmt.Sprintf("/api/v1: %v %s", err, body)
					return
				}
			}
		}()
	}
	for i := 0; i < 30; i++ {
		if i%2 == 0 {
			res.set(discoveryConfigMaps, discoveryDeployments, discoveryWidgets)
		} else {
			res.set(discoveryConfigMaps, discoveryDeployments)
		}
		get(t, base+"/apis", aggregatedAccept)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
