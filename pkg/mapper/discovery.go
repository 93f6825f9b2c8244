package mapper

import (
	"context"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
)

// ViewResources returns the resources of a location view that can be mapped, read from the
// view's discovery: every resource served with list and watch (not the view's own namespaces
// list, not subresources), at the group's preferred version, restricted to only when it is
// not empty. The bool is whether the resource is namespaced. complete is false when part of
// discovery failed (then the result holds what could be read, and err says what failed).
func ViewResources(d discovery.DiscoveryInterface, only []schema.GroupResource) (resources map[schema.GroupVersionResource]bool, complete bool, err error) {
	lists, err := d.ServerPreferredResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, false, err
	}
	want := sets.New(only...)
	resources = map[schema.GroupVersionResource]bool{}
	for _, list := range lists {
		gv, perr := schema.ParseGroupVersion(list.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !sets.New(r.Verbs...).HasAll("list", "watch") {
				continue
			}
			gvr := gv.WithResource(r.Name)
			if len(only) > 0 && !want.Has(gvr.GroupResource()) {
				continue
			}
			resources[gvr] = r.Namespaced
		}
	}
	return resources, err == nil, err
}

// TargetServes reports, for each of gvrs, whether the target's discovery lists it. A resource
// whose group version could not be read for another reason than NotFound is left out (its
// state is unknown).
func TargetServes(d discovery.DiscoveryInterface, gvrs []schema.GroupVersionResource) map[schema.GroupVersionResource]bool {
	byGV := map[schema.GroupVersion][]schema.GroupVersionResource{}
	for _, gvr := range gvrs {
		byGV[gvr.GroupVersion()] = append(byGV[gvr.GroupVersion()], gvr)
	}
	out := map[schema.GroupVersionResource]bool{}
	for gv, list := range byGV {
		served := sets.New[string]()
		resources, err := d.ServerResourcesForGroupVersion(gv.String())
		if err != nil && !apierrors.IsNotFound(err) {
			continue
		}
		if err == nil {
			for _, r := range resources.APIResources {
				served.Insert(r.Name)
			}
		}
		for _, gvr := range list {
			out[gvr] = served.Has(gvr.Resource)
		}
	}
	return out
}

// refreshResources follows the view's discovery (starting informers for new resources,
// stopping those of resources the view no longer serves) and the target's (halting resources
// the target does not serve, resuming those it serves again).
func (m *Mapper) refreshResources(ctx context.Context) {
	logger := klog.FromContext(ctx)
	only := m.cfg.Resources
	if len(only) > 0 {
		only = append(append([]schema.GroupResource{}, only...), MappingResource.GroupResource())
	}
	wanted, complete, err := ViewResources(m.viewDiscovery, only)
	if err != nil {
		logger.Error(err, "Reading the view's discovery failed; keeping the resources mapped so far")
		if wanted == nil {
			return
		}
	}
	if !m.applyMappings(ctx, wanted) {
		return
	}
	for gvr, namespaced := range wanted {
		if m.resource(gvr) != nil {
			continue
		}
		r := m.startResource(ctx, gvr, namespaced, m.mappings.projection(gvr.GroupResource()))
		m.mu.Lock()
		m.resources[gvr] = r
		m.mu.Unlock()
		logger.Info("Mapping a resource of the view", "resource", r.name(), "groupVersion", gvr.GroupVersion().String(), "namespaced", namespaced)
	}
	if complete {
		for _, r := range m.resourceList() {
			if _, ok := wanted[r.gvr]; ok {
				continue
			}
			// Its objects stay on the target: an empty or failing discovery must not delete.
			logger.Info("The view no longer serves a resource; stopping it, its target copies stay", "resource", r.name())
			r.stop(m.metrics)
			m.places.dropClaims(r.gvr)
			m.mu.Lock()
			delete(m.resources, r.gvr)
			m.mu.Unlock()
		}
	}
	for _, gr := range m.cfg.Resources {
		found := false
		for gvr := range wanted {
			found = found || gvr.GroupResource() == gr
		}
		if !found {
			logger.V(2).Info("A requested resource is not served by the view (yet)", "resource", gr.String())
		}
	}

	if complete {
		m.viewDiscovered.Store(true)
	}

	resources := m.resourceList()
	gvrs := make([]schema.GroupVersionResource, 0, len(resources))
	for _, r := range resources {
		gvrs = append(gvrs, r.targetGVR())
	}
	served := TargetServes(m.targetDiscovery, gvrs)
	for _, r := range resources {
		if s, known := served[r.targetGVR()]; known {
			// A resource two ResourceMappings name is mapped by neither: halted.
			m.setServed(ctx, r, s && r.projection.Blocked == "")
		}
	}
	m.checkSchemas(ctx, resources)
}
