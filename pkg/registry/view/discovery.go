package view

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// resourceLister lists the mirrored resources (cache.Cache.Resources).
type resourceLister interface {
	// Resources returns the currently mirrored resources, sorted by group, resource, version.
	Resources() []source.ResourceInfo
}

// viewDiscovery serves the discovery of location views with k8s.io/apiserver's own discovery
// handlers, as kube-apiserver and apiextensions-apiserver serve theirs:
//   - /api: discovery.NewLegacyRootAPIHandler, and the aggregated form
//     (Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList) from an
//     aggregated.ResourceManager holding core v1, joined by
//     aggregated.WrapAggregatedDiscoveryToHandler as kube-apiserver does for its /api;
//   - /apis: discovery.NewRootAPIsHandler and a second ResourceManager for the named groups;
//   - /apis/<group>: discovery.APIGroupHandler; /api/v1 and /apis/<group>/<version>:
//     discovery.APIVersionHandler.
//
// With aggregated discovery a client-go discovery refresh is two requests (/api and /apis)
// instead of two plus one per group version.
//
// One set serves every location: the content is the same for every view. A view differs from
// another in which objects it shows, never in which resources it serves (every view serves
// every mirrored resource; one with no object of the location is an empty list there, as a
// resource without objects is on kube-apiserver), so per-location copies would be thousands of
// identical documents, each re-hashed for its ETag on every change.
//
// The content follows the mirrored resources (which the cache updates from the source's
// discovery every --source-discovery-interval): each discovery request compares the cache's
// current resources with those the documents were built from and rebuilds them first if they
// differ, as apiextensions-apiserver's DiscoveryController rebuilds on a CRD event. The cache
// has no change notification, and checking at read time means no document is ever older than
// the cache, at the cost of one copy of the resource list per discovery request.
type viewDiscovery struct {
	resources resourceLister
	codecs    runtimeserializer.CodecFactory
	// legacy serves /api (core v1), legacyManager its aggregated form.
	legacy        http.Handler
	legacyManager aggregated.ResourceManager
	// manager holds the aggregated form of /apis.
	manager aggregated.ResourceManager

	mu sync.Mutex
	// applied are the resources the handlers were built from; handlers is nil until the first
	// request.
	applied  []source.ResourceInfo
	handlers *discoveryHandlers
}

// discoveryHandlers are the handlers of one version of the discovery content.
type discoveryHandlers struct {
	apis     http.Handler
	groups   map[string]http.Handler
	versions map[schema.GroupVersion]http.Handler
}

// newViewDiscovery returns the discovery of views over the mirrored resources of resources.
func newViewDiscovery(resources resourceLister) *viewDiscovery {
	codecs := runtimeserializer.NewCodecFactory(metaScheme)
	// The path names label the managers' request metrics (the subresource label), apart from
	// mapper-apiserver's own /api and /apis.
	legacyManager := aggregated.NewResourceManager("locations/proxy/api")
	return &viewDiscovery{
		resources:     resources,
		codecs:        codecs,
		legacy:        aggregated.WrapAggregatedDiscoveryToHandler(discovery.NewLegacyRootAPIHandler(noAddresses{}, codecs, "/api"), legacyManager, nil),
		legacyManager: legacyManager,
		manager:       aggregated.NewResourceManager("locations/proxy/apis"),
	}
}

// serve answers the discovery request req for path, the path inside a view: /api, /api/v1,
// /apis, /apis/<group> or /apis/<group>/<version> (GET only, as kube-apiserver). Any other
// path is 404, another method 405, both as a Kubernetes Status.
func (d *viewDiscovery) serve(w http.ResponseWriter, req *http.Request, path string) {
	h, err := d.current()
	if err != nil {
		d.writeError(w, req, apierrors.NewInternalError(err))
		return
	}
	var handler http.Handler
	switch parts := strings.Split(strings.Trim(path, "/"), "/"); {
	case len(parts) == 1 && parts[0] == "api":
		handler = d.legacy
	case len(parts) == 2 && parts[0] == "api":
		handler = h.versions[schema.GroupVersion{Version: parts[1]}]
	case len(parts) == 1 && parts[0] == "apis":
		handler = h.apis
	case len(parts) == 2 && parts[0] == "apis" && parts[1] != "":
		handler = h.groups[parts[1]]
	case len(parts) == 3 && parts[0] == "apis" && parts[1] != "":
		handler = h.versions[schema.GroupVersion{Group: parts[1], Version: parts[2]}]
	}
	switch {
	case handler == nil:
		d.writeError(w, req, apierrors.NewNotFound(schema.GroupResource{}, path))
	case req.Method != http.MethodGet:
		err := apierrors.NewMethodNotSupported(schema.GroupResource{}, req.Method)
		err.ErrStatus.Message = fmt.Sprintf("%s is a discovery document of the view; it can only be read (GET), not %s", path, req.Method)
		d.writeError(w, req, err)
	default:
		handler.ServeHTTP(w, req)
	}
}

// current returns the handlers of the current mirrored resources, rebuilding them (and
// setting the aggregated documents) if the resources changed since they were built.
func (d *viewDiscovery) current() (*discoveryHandlers, error) {
	infos := d.resources.Resources()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.handlers != nil && sameDiscovery(infos, d.applied) {
		return d.handlers, nil
	}
	content, err := newDiscoveryContent(infos)
	if err != nil {
		if d.handlers != nil {
			klog.ErrorS(err, "Building the views' discovery failed; serving the previous documents")
			return d.handlers, nil
		}
		return nil, err
	}
	root := discovery.NewRootAPIsHandler(noAddresses{}, d.codecs)
	h := &discoveryHandlers{
		apis:     aggregated.WrapAggregatedDiscoveryToHandler(root, d.manager, nil),
		groups:   make(map[string]http.Handler, len(content.groups)),
		versions: make(map[schema.GroupVersion]http.Handler, len(content.resources)),
	}
	for _, g := range content.groups {
		root.AddGroup(g)
		h.groups[g.Name] = discovery.NewAPIGroupHandler(d.codecs, g)
	}
	for gv, list := range content.resources {
		h.versions[gv] = discovery.NewAPIVersionHandler(d.codecs, gv, discovery.APIResourceListerFunc(func() []metav1.APIResource { return list }))
	}
	d.legacyManager.SetGroups(content.legacyAggregated)
	d.manager.SetGroups(content.aggregated)
	d.applied, d.handlers = infos, h
	return h, nil
}

// sameDiscovery reports whether a and b describe the same discovery content: the same
// resources with the same fields that discovery shows (newDiscoveryContent). It is the check
// every discovery request makes, written out because reflect.DeepEqual cost a quarter of an
// aggregated /apis request over 200 resources (BenchmarkDiscoveryAggregated).
func sameDiscovery(a, b []source.ResourceInfo) bool {
	return slices.EqualFunc(a, b, func(x, y source.ResourceInfo) bool {
		return x.GVR == y.GVR && x.Kind == y.Kind && x.SingularName == y.SingularName && x.Namespaced == y.Namespaced &&
			slices.Equal(x.ShortNames, y.ShortNames) && slices.Equal(x.Categories, y.Categories)
	})
}

// writeError writes err as a Kubernetes Status in the format the client asked for.
func (d *viewDiscovery) writeError(w http.ResponseWriter, req *http.Request, err error) {
	responsewriters.ErrorNegotiated(err, d.codecs, schema.GroupVersion{Version: "v1"}, w, req)
}

// noAddresses is the discovery.Addresses of views: a view is a path below another server's
// URL, which serverAddressByClientCIDRs (host and port only) cannot express, so the documents
// list no address; clients use the URL they reached the view at.
type noAddresses struct{}

// ServerAddressByClientCIDRs returns an empty list.
func (noAddresses) ServerAddressByClientCIDRs(net.IP) []metav1.ServerAddressByClientCIDR {
	return []metav1.ServerAddressByClientCIDR{}
}
