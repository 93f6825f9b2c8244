package source

import (
	"errors"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
)

// excludedByDefault are the resources that are never mirrored unless Config.Resources names
// them: events (core and events.k8s.io, high churn, not workload) and leases (heartbeats).
var excludedByDefault = sets.New(
	schema.GroupResource{Resource: "events"},
	schema.GroupResource{Group: "events.k8s.io", Resource: "events"},
	schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"},
)

// Discover reads the source's discovery and selects the resources to mirror (see
// selectResources): wanted empty means every namespaced resource with list and watch except
// events and leases, otherwise exactly the wanted group resources. failedGroups are the API
// groups whose discovery failed (discovery.ErrGroupDiscoveryFailed): the caller keeps mirroring
// what it already mirrors of those groups. err is set only when nothing could be read.
func (s *Source) Discover(wanted []schema.GroupResource) (infos []ResourceInfo, failedGroups sets.Set[string], err error) {
	return discoverResources(s.cfg.Discovery, wanted)
}

// discoverResources reads d and selects the resources to mirror (see
// selectResources). failedGroups are the API groups whose discovery failed: the caller keeps
// mirroring what it already mirrors of those groups. err is set only when nothing could be read.
func discoverResources(d discovery.DiscoveryInterface, wanted []schema.GroupResource) (infos []ResourceInfo, failedGroups sets.Set[string], err error) {
	groups, lists, err := d.ServerGroupsAndResources()
	failedGroups = sets.New[string]()
	if err != nil {
		var partial *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &partial) {
			return nil, nil, err
		}
		for gv := range partial.Groups {
			failedGroups.Insert(gv.Group)
		}
	}
	return selectResources(groups, lists, wanted), failedGroups, nil
}

// selectResources picks the resources to mirror from the source's discovery: each group
// resource once, at the first version of its group's version priority order that serves it
// (like discovery.ServerPreferredResources), only with the list and watch verbs, never
// subresources. With wanted empty: every namespaced resource except events (core and
// events.k8s.io) and leases (coordination.k8s.io). Otherwise exactly the wanted group resources
// (namespaced or not). The result is sorted by group, resource.
func selectResources(groups []*metav1.APIGroup, lists []*metav1.APIResourceList, wanted []schema.GroupResource) []ResourceInfo {
	byGV := map[string]*metav1.APIResourceList{}
	for _, l := range lists {
		if l != nil {
			byGV[l.GroupVersion] = l
		}
	}
	want := sets.New(wanted...)
	var out []ResourceInfo
	for _, g := range groups {
		if g == nil {
			continue
		}
		seen := sets.New[string]()
		versions := g.Versions
		// The preferred version first, then the rest in the server's priority order.
		if pv := g.PreferredVersion.GroupVersion; pv != "" {
			ordered := []metav1.GroupVersionForDiscovery{g.PreferredVersion}
			for _, v := range versions {
				if v.GroupVersion != pv {
					ordered = append(ordered, v)
				}
			}
			versions = ordered
		}
		for _, v := range versions {
			l := byGV[v.GroupVersion]
			if l == nil {
				continue
			}
			gv, err := schema.ParseGroupVersion(v.GroupVersion)
			if err != nil {
				continue
			}
			subresources := sets.New[string]()
			for _, r := range l.APIResources {
				if strings.Contains(r.Name, "/") {
					subresources.Insert(r.Name)
				}
			}
			for _, r := range l.APIResources {
				if strings.Contains(r.Name, "/") || seen.Has(r.Name) {
					continue
				}
				gr := schema.GroupResource{Group: gv.Group, Resource: r.Name}
				verbs := sets.New(r.Verbs...)
				if !verbs.Has("list") || !verbs.Has("watch") {
					continue
				}
				if len(want) > 0 {
					if !want.Has(gr) {
						continue
					}
				} else if !r.Namespaced || excludedByDefault.Has(gr) {
					continue
				}
				seen.Insert(r.Name)
				out = append(out, ResourceInfo{
					GVR:          gv.WithResource(r.Name),
					Kind:         r.Kind,
					ListKind:     r.Kind + "List",
					SingularName: r.SingularName,
					Namespaced:   r.Namespaced,
					ShortNames:   append([]string(nil), r.ShortNames...),
					Categories:   append([]string(nil), r.Categories...),
					Verbs:        append([]string(nil), r.Verbs...),
					HasStatus:    subresources.Has(r.Name + "/status"),
				})
			}
		}
	}
	SortResources(out)
	return out
}
