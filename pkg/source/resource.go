package source

import (
	"sort"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ResourceInfo describes one resource of the source, as the source's discovery describes it:
// the cache mirrors it and the views build their own discovery documents from it.
type ResourceInfo struct {
	// GVR is the resource at the source's preferred version.
	GVR schema.GroupVersionResource
	// Kind, ListKind and SingularName name the resource's types (ListKind is Kind+"List").
	Kind, ListKind, SingularName string
	// Namespaced says whether the resource is namespaced.
	Namespaced bool
	// ShortNames and Categories are copied from the source.
	ShortNames, Categories []string
	// Verbs are the verbs the source serves for the resource (the view decides which it
	// offers).
	Verbs []string
	// HasStatus says whether the source serves the resource's /status subresource.
	HasStatus bool
}

// GVK returns the kind of the resource's objects.
func (r ResourceInfo) GVK() schema.GroupVersionKind { return r.GVR.GroupVersion().WithKind(r.Kind) }

// SortResources orders infos by group, resource, version (in place), the order in which
// discovery documents and Cache.Resources list them.
func SortResources(infos []ResourceInfo) {
	sort.Slice(infos, func(i, j int) bool {
		a, b := infos[i].GVR, infos[j].GVR
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Resource != b.Resource {
			return a.Resource < b.Resource
		}
		return a.Version < b.Version
	})
}
