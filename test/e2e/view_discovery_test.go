package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// discoveryMirrored are the group resources the mapper-apiserver of TestViewDiscovery mirrors
// (its --resources); gadgets are served by the source only once the test creates their CRD.
var discoveryMirrored = sets.New(
	schema.GroupResource{Resource: "configmaps"},
	schema.GroupResource{Group: "apps", Resource: "deployments"},
	schema.GroupResource{Group: "example.com", Resource: "widgets"},
	schema.GroupResource{Group: "example.com", Resource: "gadgets"},
)

// viewRoute is one way to reach a location view: straight to mapper-apiserver, or through
// kube-apiserver's aggregator.
type viewRoute struct {
	name   string
	config *rest.Config
	// kubeconfig points kubectl at the view.
	kubeconfig string
}

// TestViewDiscovery proves that views serve discovery the way kube-apiserver does, aggregated
// discovery included, straight and through the aggregator: one client-go
// discovery refresh costs at most 2 requests, `kubectl api-resources` on a view lists exactly
// the mirrored resources (and the view's namespaces) as the source describes them, and a CRD
// created later appears in (and, deleted, leaves) aggregated discovery.
func TestViewDiscovery(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	source, src := startSource(t)
	createCRD(t, ctx, src, "widgets", "Widget")
	api := framework.StartAggregatedMapperAPIServer(t, source,
		"--resources=configmaps,deployments.apps,widgets.example.com,gadgets.example.com",
		"--source-discovery-interval=1s",
	)
	admin := source.Admin()
	routes := []viewRoute{
		{name: "direct", config: api.Server.ViewConfig(admin, "east"), kubeconfig: admin.KubeconfigFor(t, api.Server.ViewURL("east"), api.Server.ServingCA.CertPEM)},
		{name: "aggregator", config: api.ViewConfig(admin, "east"), kubeconfig: admin.KubeconfigFor(t, api.ViewURL("east"), source.ServingCABundle())},
	}
	// The mirrored resources are there once the view serves them; discovery must not run ahead
	// of that or behind it.
	waitServed(t, ctx, routes[0].config, configMapsGVR, deploymentsGVR, widgetsGVR)

	for _, r := range routes {
		t.Run("one refresh is at most 2 requests/"+r.name, func(t *testing.T) { testDiscoveryRequests(t, r) })
	}
	for _, r := range routes {
		t.Run("kubectl api-resources/"+r.name, func(t *testing.T) { testAPIResources(t, source.AdminKubeconfig(), r, mirroredByFlag, 4) })
	}
	t.Run("kubectl api-resources/default resources", func(t *testing.T) {
		// A second server, without --resources: it mirrors every namespaced resource.
		all := framework.StartMapperAPIServer(t, source)
		r := viewRoute{name: "default", config: all.ViewConfig(admin, "east"), kubeconfig: admin.KubeconfigFor(t, all.ViewURL("east"), all.ServingCA.CertPEM)}
		testAPIResources(t, source.AdminKubeconfig(), r, mirroredByDefault, 15)
		if err := all.Process.Stop(); err != nil {
			t.Error(err)
		}
	})
	t.Run("CRD added later", func(t *testing.T) { testDiscoveryNewCRD(t, ctx, src, routes) })
}

// waitServed waits until the view of cfg lists every gvr.
func waitServed(t *testing.T, ctx context.Context, cfg *rest.Config, gvrs ...schema.GroupVersionResource) {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, gvr := range gvrs {
		path := "/apis/" + gvr.GroupVersion().String() + "/" + gvr.Resource
		if gvr.Group == "" {
			path = "/api/" + gvr.Version + "/" + gvr.Resource
		}
		var last string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			resp, body := getWithAccept(ctx, client, cfg.Host+path+"?limit=1", "application/json")
			last = fmt.Sprintf("%d %s", resp, body)
			return resp == http.StatusOK, nil
		})
		if err != nil {
			t.Fatalf("the view does not serve %s: %s", gvr, last)
		}
	}
}

// getWithAccept GETs url with accept and returns the status code and body (0 and the error text if
// the request failed).
func getWithAccept(ctx context.Context, client *http.Client, url, accept string) (int, []byte) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, []byte(err.Error())
	}
	req.Header.Set("Accept", accept)
	resp, err := client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// requestCounter is a WrapTransport that records every request of a client.
type requestCounter struct {
	mu    sync.Mutex
	paths []string
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		c.mu.Lock()
		c.paths = append(c.paths, req.URL.Path)
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

func (c *requestCounter) requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.paths...)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// testDiscoveryRequests runs one client-go discovery refresh against the view, counting its
// requests, and checks what it found.
func testDiscoveryRequests(t *testing.T, r viewRoute) {
	counter := &requestCounter{}
	cfg := rest.CopyConfig(r.config)
	cfg.WrapTransport = counter.wrap
	client, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := client.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	reqs := counter.requests()
	t.Logf("one discovery refresh through %s: %d requests %v", r.name, len(reqs), reqs)
	if len(reqs) > 2 {
		t.Errorf("one discovery refresh made %d requests, want at most 2: %v", len(reqs), reqs)
	}
	got := sets.New[string]()
	for _, l := range lists {
		for _, res := range l.APIResources {
			got.Insert(l.GroupVersion + " " + res.Name)
		}
	}
	want := sets.New(
		"v1 namespaces", "v1 configmaps", "v1 configmaps/status",
		"apps/v1 deployments", "apps/v1 deployments/status",
		"example.com/v1 widgets", "example.com/v1 widgets/status",
	)
	if !want.Equal(got) {
		t.Errorf("client-go discovered %s", diff(want, got))
	}
}

// defaultExcluded are the namespaced resources a mapper-apiserver without --resources does not
// mirror (cmd/mapper-apiserver --resources: events and leases).
var defaultExcluded = sets.New(
	schema.GroupResource{Resource: "events"},
	schema.GroupResource{Group: "events.k8s.io", Resource: "events"},
	schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"},
)

// mirroredByFlag says whether a mapper-apiserver with TestViewDiscovery's --resources mirrors
// a resource the source lists.
func mirroredByFlag(r metav1.APIResource) bool {
	return discoveryMirrored.Has(schema.GroupResource{Group: r.Group, Resource: r.Name})
}

// mirroredByDefault says whether a mapper-apiserver without --resources mirrors a resource
// the source lists: every namespaced one served with list and watch, except events and leases.
func mirroredByDefault(r metav1.APIResource) bool {
	return r.Namespaced && sets.New(r.Verbs...).HasAll("list", "watch") &&
		!defaultExcluded.Has(schema.GroupResource{Group: r.Group, Resource: r.Name})
}

// testAPIResources compares `kubectl api-resources` on the view with the source's: the view
// lists exactly the resources the source lists and the server mirrors (mirrored), plus the
// view's own namespaces, each with the source's kind, short names, scope and categories and
// the verbs the view serves. wantAtLeast guards against a source that lists too little.
func testAPIResources(t *testing.T, sourceKubeconfig string, r viewRoute, mirrored func(metav1.APIResource) bool, wantAtLeast int) {
	sourceList := apiResourcesJSON(t, sourceKubeconfig)
	var want []metav1.APIResource
	for _, res := range sourceList {
		switch {
		case res.Group == "" && res.Name == "namespaces":
			res.Verbs = metav1.Verbs{"get", "list"}
		case mirrored(res):
			res.Verbs = metav1.Verbs{"get", "list", "watch"}
		default:
			continue
		}
		want = append(want, res)
	}
	if len(want) < wantAtLeast {
		t.Fatalf("the source lists %d of the mirrored resources and namespaces, want at least %d: %+v", len(want), wantAtLeast, want)
	}
	t.Logf("the view lists %d resources", len(want))
	got := apiResourcesJSON(t, r.kubeconfig)
	if w, g := describeAll(want), describeAll(got); w != g {
		t.Errorf("kubectl api-resources -o json on the view:\n%s\nwant (the source's entries of the mirrored resources):\n%s", g, w)
	}

	// The human-readable table says the same, cell for cell.
	sourceOut, err := framework.RunKubectl(t, sourceKubeconfig, "api-resources", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	viewOut, err := framework.RunKubectl(t, r.kubeconfig, "api-resources", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	wantRows, sourceRows := sets.New[string](), sets.New[string]()
	for _, res := range want {
		wantRows.Insert(tableRow(res))
	}
	for _, cells := range tableCells(t, sourceOut) {
		cells[5] = "" // VERBS: the view's differ
		sourceRows.Insert(strings.Join(cells, " | "))
	}
	for row := range wantRows {
		cells := strings.Split(row, " | ")
		cells[5] = ""
		if !sourceRows.Has(strings.Join(cells, " | ")) {
			t.Fatalf("the source's table has no row %q: the test's idea of kubectl's columns is wrong:\n%s", row, sourceOut)
		}
	}
	gotRows := sets.New[string]()
	for _, cells := range tableCells(t, viewOut) {
		gotRows.Insert(strings.Join(cells, " | "))
	}
	if !wantRows.Equal(gotRows) {
		t.Errorf("kubectl api-resources -o wide on the view: %s\n%s", diff(wantRows, gotRows), viewOut)
	}
}

// apiResourcesJSON runs `kubectl api-resources -o json` and returns its resources.
func apiResourcesJSON(t *testing.T, kubeconfig string) []metav1.APIResource {
	t.Helper()
	out, err := framework.RunKubectl(t, kubeconfig, "api-resources", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("kubectl api-resources -o json: %v\n%s", err, out)
	}
	return list.APIResources
}

// describeAll renders resources sorted, one per line, for comparison.
func describeAll(resources []metav1.APIResource) string {
	lines := make([]string, 0, len(resources))
	for _, r := range resources {
		b, _ := json.Marshal(r)
		lines = append(lines, string(b))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// apiResourcesColumns are the columns of `kubectl api-resources -o wide`.
var apiResourcesColumns = []string{"NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND", "VERBS", "CATEGORIES"}

// tableRow is r's row in `kubectl api-resources -o wide`, its cells joined by " | ".
func tableRow(r metav1.APIResource) string {
	gv := schema.GroupVersion{Group: r.Group, Version: r.Version}.String()
	return strings.Join([]string{r.Name, strings.Join(r.ShortNames, ","), gv, fmt.Sprint(r.Namespaced), r.Kind,
		strings.Join(r.Verbs, ","), strings.Join(r.Categories, ",")}, " | ")
}

// tableCells splits kubectl's `api-resources -o wide` table into the cells of each row, by the
// columns' offsets in the header (cells may be empty, so fields cannot be split on spaces).
func tableCells(t *testing.T, out string) [][]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	header := lines[0]
	offsets := make([]int, len(apiResourcesColumns))
	for i, c := range apiResourcesColumns {
		offsets[i] = strings.Index(header, c)
		if offsets[i] < 0 || (i > 0 && offsets[i] <= offsets[i-1]) {
			t.Fatalf("kubectl api-resources -o wide has no column %s in its header %q", c, header)
		}
	}
	var rows [][]string
	for _, line := range lines[1:] {
		cells := make([]string, len(offsets))
		for i, off := range offsets {
			end := len(line)
			if i+1 < len(offsets) && offsets[i+1] < end {
				end = offsets[i+1]
			}
			if off < end {
				cells[i] = strings.TrimSpace(line[off:end])
			}
		}
		rows = append(rows, cells)
	}
	return rows
}

// aggregatedAccept asks for aggregated discovery (KEP-3352), as client-go does first.
const aggregatedAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// aggregatedEntry reads the aggregated discovery of /apis below base and returns gv's entry of
// resource, whether it is listed, and on failure what was answered.
func aggregatedEntry(ctx context.Context, client *http.Client, base string, gv schema.GroupVersion, resource string) (apidiscoveryv2.APIResourceDiscovery, bool, string) {
	code, body := getWithAccept(ctx, client, base+"/apis", aggregatedAccept)
	if code != http.StatusOK {
		return apidiscoveryv2.APIResourceDiscovery{}, false, fmt.Sprintf("%d %s", code, body)
	}
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(body, &list); err != nil || list.Kind != "APIGroupDiscoveryList" {
		return apidiscoveryv2.APIResourceDiscovery{}, false, fmt.Sprintf("not an APIGroupDiscoveryList (%v): %s", err, body)
	}
	for _, g := range list.Items {
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				if g.Name == gv.Group && v.Version == gv.Version && r.Resource == resource {
					return r, true, ""
				}
			}
		}
	}
	return apidiscoveryv2.APIResourceDiscovery{}, false, string(body)
}

// testDiscoveryNewCRD creates a CRD in the source and waits until the view's aggregated
// discovery lists it as the source names it, with the verbs the view serves; then deletes the
// CRD and waits until it is gone.
func testDiscoveryNewCRD(t *testing.T, ctx context.Context, src dynamic.Interface, routes []viewRoute) {
	gv := gadgetsGVR.GroupVersion()
	clients := make([]*http.Client, len(routes))
	for i, r := range routes {
		c, err := rest.HTTPClientFor(r.config)
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
		if _, found, answer := aggregatedEntry(ctx, c, r.config.Host, gv, "gadgets"); found || answer == "" {
			t.Fatalf("%s: gadgets in aggregated discovery before their CRD exists (%s)", r.name, answer)
		}
	}

	created := time.Now()
	createCRD(t, ctx, src, "gadgets", "Gadget")
	want := apidiscoveryv2.APIResourceDiscovery{
		Resource: "gadgets", ResponseKind: &metav1.GroupVersionKind{Kind: "Gadget"}, Scope: apidiscoveryv2.ScopeNamespace,
		SingularResource: "gadget", Verbs: []string{"get", "list", "watch"},
		Subresources: []apidiscoveryv2.APISubresourceDiscovery{{
			Subresource: "status", ResponseKind: &metav1.GroupVersionKind{Kind: "Gadget"}, Verbs: []string{"get", "patch", "update"},
		}},
	}
	for i, r := range routes {
		var got apidiscoveryv2.APIResourceDiscovery
		var last string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var found bool
			got, found, last = aggregatedEntry(ctx, clients[i], r.config.Host, gv, "gadgets")
			return found, nil
		})
		if err != nil {
			t.Fatalf("%s: gadgets did not appear in aggregated discovery: %s", r.name, last)
		}
		t.Logf("%s: gadgets in aggregated discovery %v after the CRD was created", r.name, time.Since(created).Round(time.Millisecond))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: aggregated discovery of gadgets = %+v\nwant %+v", r.name, got, want)
		}
	}

	if err := src.Resource(crdGVR).Delete(ctx, "gadgets.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, r := range routes {
		var last string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var found bool
			_, found, last = aggregatedEntry(ctx, clients[i], r.config.Host, gv, "gadgets")
			return !found && strings.Contains(last, "APIGroupDiscoveryList"), nil
		})
		if err != nil {
			t.Errorf("%s: gadgets stayed in aggregated discovery after their CRD was deleted: %s", r.name, last)
		}
	}
}
