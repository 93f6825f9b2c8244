package view

import (
	"fmt"
	"sort"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/endpoints"

	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// namespacesGVR is the view's own, read-only namespaces resource: the namespaces that hold
// objects of the location.
var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// Verbs a view advertises, which are exactly the ones ServeView serves.
var (
	// resourceVerbs are the verbs of a mirrored resource: reads only.
	resourceVerbs = metav1.Verbs{"get", "list", "watch"}
	// statusVerbs are the verbs of a mirrored resource's /status (status write-back). Views
	// serve /status for every mirrored resource: where the source has no status subresource,
	// statusStorage writes .status through the main resource.
	statusVerbs = metav1.Verbs{"get", "patch", "update"}
	// namespaceVerbs are the verbs of the view's namespaces (namespaceStorage has no watch).
	namespaceVerbs = metav1.Verbs{"get", "list"}
)

// namespacesAPIResource is the discovery entry of the view's namespaces, named as
// kube-apiserver names its namespaces resource.
var namespacesAPIResource = metav1.APIResource{
	Name: namespacesGVR.Resource, SingularName: "namespace", Namespaced: false, Kind: "Namespace",
	Verbs: namespaceVerbs, ShortNames: []string{"ns"},
}

// discoveryContent is everything a view's discovery serves, built from the mirrored resources:
// the unaggregated documents (groups, resource lists per group version) and the aggregated ones
// (apidiscovery.k8s.io/v2, for /api and /apis).
type discoveryContent struct {
	// groups are the named API groups (not the legacy core group), sorted by name; each
	// group's versions are sorted as kube-apiserver sorts a CRD group's versions (kube-aware
	// version order, highest first), and its preferred version is the first.
	groups []metav1.APIGroup
	// resources are the APIResourceList entries of each group version, legacy core v1
	// included, sorted by name (a resource's /status follows the resource).
	resources map[schema.GroupVersion][]metav1.APIResource
	// legacyAggregated is the aggregated discovery of /api (the core group's v1 only).
	legacyAggregated []apidiscoveryv2.APIGroupDiscovery
	// aggregated is the aggregated discovery of /apis (every named group).
	aggregated []apidiscoveryv2.APIGroupDiscovery
}

// newDiscoveryContent builds the discovery content of a view over the mirrored resources
// infos (as cache.Cache.Resources returns them).
//
// Every mirrored resource is listed at the version the cache mirrors it (the source's preferred
// version of the resource), with the source's kind, singular name, scope, short names and
// categories, the verbs get, list and watch, and a /status subresource with get, patch and
// update. The view's own namespaces resource is always in core v1 (verbs get and list); a
// mirrored core namespaces resource is not listed, as views always serve their own. The
// aggregated entries are converted from the unaggregated ones by
// endpoints.ConvertGroupVersionIntoToDiscovery, the function kube-apiserver uses for its own
// resources, so both forms always agree. It fails only if that conversion does (a resource and
// its subresource of different scopes, which cannot happen here).
func newDiscoveryContent(infos []source.ResourceInfo) (*discoveryContent, error) {
	core := schema.GroupVersion{Version: "v1"}
	resources := map[schema.GroupVersion][]metav1.APIResource{core: {namespacesAPIResource}}
	versions := map[string][]string{}
	for _, r := range infos {
		if r.GVR == namespacesGVR {
			continue
		}
		gv := r.GVR.GroupVersion()
		if _, ok := resources[gv]; !ok && gv.Group != "" {
			versions[gv.Group] = append(versions[gv.Group], gv.Version)
		}
		resources[gv] = append(resources[gv], metav1.APIResource{
			Name: r.GVR.Resource, SingularName: r.SingularName, Namespaced: r.Namespaced, Kind: r.Kind,
			Verbs: resourceVerbs, ShortNames: r.ShortNames, Categories: r.Categories,
		}, metav1.APIResource{
			Name: r.GVR.Resource + "/status", Namespaced: r.Namespaced, Kind: r.Kind, Verbs: statusVerbs,
		})
	}

	c := &discoveryContent{resources: resources}
	aggregated := make(map[schema.GroupVersion]apidiscoveryv2.APIVersionDiscovery, len(resources))
	for gv, list := range resources {
		sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
		converted, err := endpoints.ConvertGroupVersionIntoToDiscovery(list)
		if err != nil {
			return nil, fmt.Errorf("aggregated discovery of %s: %w", gv, err)
		}
		aggregated[gv] = apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Resources: converted, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
	}
	c.legacyAggregated = []apidiscoveryv2.APIGroupDiscovery{{Versions: []apidiscoveryv2.APIVersionDiscovery{aggregated[core]}}}

	names := make([]string, 0, len(versions))
	for g := range versions {
		names = append(names, g)
	}
	sort.Strings(names)
	for _, g := range names {
		vs := versions[g]
		sort.Slice(vs, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(vs[i], vs[j]) > 0 })
		group := metav1.APIGroup{Name: g}
		agg := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g}}
		for _, v := range vs {
			gv := schema.GroupVersion{Group: g, Version: v}
			group.Versions = append(group.Versions, metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: v})
			agg.Versions = append(agg.Versions, aggregated[gv])
		}
		group.PreferredVersion = group.Versions[0]
		c.groups = append(c.groups, group)
		c.aggregated = append(c.aggregated, agg)
	}
	return c, nil
}
