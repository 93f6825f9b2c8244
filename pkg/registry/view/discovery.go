package view

import (
	"net/http"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
)

// namespacesGVR is the view's own, read-only namespaces resource: the namespaces that hold
// objects of the location.
var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// serveDiscovery answers the discovery documents of a view: /api, /api/v1, /apis, /apis/<g>
// and /apis/<g>/<v>, built from the cache's mirrored resources at request time (so a CRD added
// to the source shows up without a restart). Views serve the unaggregated documents only;
// client-go and kubectl ask for aggregated discovery with these as fallback and use them.
func (v *Views) serveDiscovery(w http.ResponseWriter, req *http.Request, path string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	groups := v.discoveryGroups()
	var obj runtime.Object
	switch {
	case len(parts) == 1 && parts[0] == "api":
		obj = &metav1.APIVersions{Versions: []string{"v1"}}
	case len(parts) == 2 && parts[0] == "api" && parts[1] == "v1":
		obj = resourceList(schema.GroupVersion{Version: "v1"}, groups[""]["v1"])
	case len(parts) == 1 && parts[0] == "apis":
		list := &metav1.APIGroupList{Groups: []metav1.APIGroup{}}
		for _, g := range sortedGroups(groups) {
			list.Groups = append(list.Groups, apiGroup(g, groups[g]))
		}
		obj = list
	case len(parts) == 2 && parts[0] == "apis" && groups[parts[1]] != nil && parts[1] != "":
		obj = ptr(apiGroup(parts[1], groups[parts[1]]))
	case len(parts) == 3 && parts[0] == "apis" && groups[parts[1]][parts[2]] != nil && parts[1] != "":
		obj = resourceList(schema.GroupVersion{Group: parts[1], Version: parts[2]}, groups[parts[1]][parts[2]])
	default:
		v.writeError(w, req, apierrors.NewNotFound(schema.GroupResource{}, path))
		return
	}
	responsewriters.WriteObjectNegotiated(v.serializer, negotiation.DefaultEndpointRestrictions, schema.GroupVersion{Version: "v1"}, w, req, http.StatusOK, obj, false)
}

// discoveryGroups returns group → version → resources of the view.
func (v *Views) discoveryGroups() map[string]map[string][]metav1.APIResource {
	groups := map[string]map[string][]metav1.APIResource{"": {"v1": {{
		Name: "namespaces", SingularName: "namespace", Namespaced: false, Kind: "Namespace",
		Verbs: metav1.Verbs{"get", "list"}, ShortNames: []string{"ns"},
	}}}}
	for _, r := range v.cache.Resources() {
		g, ver := r.GVR.Group, r.GVR.Version
		if groups[g] == nil {
			groups[g] = map[string][]metav1.APIResource{}
		}
		groups[g][ver] = append(groups[g][ver], metav1.APIResource{
			Name: r.GVR.Resource, SingularName: r.SingularName, Namespaced: r.Namespaced, Kind: r.Kind,
			Verbs: metav1.Verbs{"get", "list", "watch"}, ShortNames: r.ShortNames, Categories: r.Categories,
		}, metav1.APIResource{
			// Status write-back: the only writes a view accepts.
			Name: r.GVR.Resource + "/status", Namespaced: r.Namespaced, Kind: r.Kind,
			Verbs: metav1.Verbs{"get", "patch", "update"},
		})
	}
	return groups
}

func resourceList(gv schema.GroupVersion, resources []metav1.APIResource) *metav1.APIResourceList {
	sort.Slice(resources, func(i, j int) bool { return resources[i].Name < resources[j].Name })
	if resources == nil {
		resources = []metav1.APIResource{}
	}
	return &metav1.APIResourceList{GroupVersion: gv.String(), APIResources: resources}
}

func apiGroup(group string, versions map[string][]metav1.APIResource) metav1.APIGroup {
	g := metav1.APIGroup{Name: group}
	for ver := range versions {
		g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: group + "/" + ver, Version: ver})
	}
	sort.Slice(g.Versions, func(i, j int) bool { return g.Versions[i].Version < g.Versions[j].Version })
	if len(g.Versions) > 0 {
		g.PreferredVersion = g.Versions[0]
	}
	return g
}

func sortedGroups(groups map[string]map[string][]metav1.APIResource) []string {
	var names []string
	for g := range groups {
		if g != "" {
			names = append(names, g)
		}
	}
	sort.Strings(names)
	return names
}

func ptr[T any](v T) *T { return &v }
