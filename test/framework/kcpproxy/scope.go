package kcpproxy

import (
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// scopeCache tells namespaced from cluster-scoped resources, from the backing server's
// discovery (cached; re-read once when a resource is unknown, e.g. a CRD added since).
type scopeCache struct {
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newScopeCache(cfg *rest.Config, hc *http.Client) (*scopeCache, error) {
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	return &scopeCache{mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))}, nil
}

// namespaced reports whether gvr is namespaced; known is false when discovery does not know
// it (the backing server will answer for it).
func (c *scopeCache) namespaced(gvr schema.GroupVersionResource) (namespaced, known bool) {
	for attempt := 0; attempt < 2; attempt++ {
		gvk, err := c.mapper.KindFor(gvr)
		if err == nil {
			m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err == nil {
				return m.Scope.Name() == meta.RESTScopeNameNamespace, true
			}
		}
		c.mapper.Reset()
	}
	return false, false
}
