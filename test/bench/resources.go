package bench

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// benchResource is one of the resources mapper-apiserver mirrors in the benchmark.
type benchResource struct {
	// kind is the kind of the data-set or watch-set objects of the resource.
	kind kind
	// name is the resource as mapper-apiserver's --resources takes it (resource.group).
	name string
	gvr  schema.GroupVersionResource
}

// benchResources are the resources mapper-apiserver mirrors: ConfigMaps and Deployments hold the
// data set; the other eight hold only scenario 2's watch set (watchset.go), created after
// scenarios 5, 4 and 1 measured, so that every location can watch 10 resources at once (scenario 2's second part).
// All ten are served by a plain kube-apiserver without controllers or extra set-up (Services are
// headless: the source's service IP range has 254 addresses). ResourceQuotas and LimitRanges are
// left out: they would change the admission of the data set's namespaces.
var benchResources = []benchResource{
	{kind: kindConfigMap, name: "configmaps", gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}},
	{kind: kindDeployment, name: "deployments.apps", gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}},
	{kind: kindSecret, name: "secrets", gvr: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}},
	{kind: kindServiceAccount, name: "serviceaccounts", gvr: schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}},
	{kind: kindService, name: "services", gvr: schema.GroupVersionResource{Version: "v1", Resource: "services"}},
	{kind: kindPVC, name: "persistentvolumeclaims", gvr: schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}},
	{kind: kindPodTemplate, name: "podtemplates", gvr: schema.GroupVersionResource{Version: "v1", Resource: "podtemplates"}},
	{kind: kindStatefulSet, name: "statefulsets.apps", gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}},
	{kind: kindCronJob, name: "cronjobs.batch", gvr: schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}},
	{kind: kindRole, name: "roles.rbac.authorization.k8s.io", gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}},
}

// mapperArgs are the extra arguments mapper-apiserver runs with: it mirrors benchResources.
var mapperArgs = []string{"--resources=" + resourceNames()}

// resourceNames returns the names of benchResources, comma-separated.
func resourceNames() string {
	names := make([]string, len(benchResources))
	for i, r := range benchResources {
		names[i] = r.name
	}
	return strings.Join(names, ",")
}

// resourceOf returns the resource of objects of kind k.
func resourceOf(k kind) benchResource {
	for _, r := range benchResources {
		if r.kind == k {
			return r
		}
	}
	panic("no resource for kind")
}

// configMaps is the resource of the data set's ConfigMaps (the one scenarios 1, 3, 7 and 9 and
// scenario 2's one-watch-per-location phases watch).
var configMaps = benchResources[0]

// path returns the resource's collection path across namespaces, e.g. /api/v1/configmaps or
// /apis/apps/v1/deployments.
func (r benchResource) path() string {
	if r.gvr.Group == "" {
		return "/api/" + r.gvr.Version + "/" + r.gvr.Resource
	}
	return "/apis/" + r.gvr.Group + "/" + r.gvr.Version + "/" + r.gvr.Resource
}

// watchKey identifies the watches of one resource on one location: the events of a write are
// owed to the watches of its resource on each location of its old and new assignment.
func watchKey(resource, location string) string { return resource + " " + location }
