package mapper

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// MappingResource is the resource of ResourceMappings (docs/resourcemapping.md). A mapper
// reads them from its view and never copies them onto its target.
var MappingResource = controlv1alpha1.SchemeGroupVersion.WithResource("resourcemappings")

// Projection says how the objects of one view resource are written on the target. The zero
// Projection writes them as they are (under their own resource and kind).
type Projection struct {
	// Mapping is the contract.Key of the ResourceMapping in force ("" when none).
	Mapping string
	// SourceVersion is the version the view objects are read at (spec.source.version).
	SourceVersion string
	// Target is the target resource and Kind the copies' kind; both zero keep the objects'
	// own.
	Target schema.GroupVersionResource
	Kind   string
	// Naming, when not nil, gives each copy's target namespace and name (spec.naming); the
	// same spec yields the same *Naming, so that Projections stay comparable.
	Naming *Naming
	// Blocked, when not empty, says why the resource is not mapped at all (two ResourceMappings
	// name it, or its mapping's naming does not compile): it is halted as a resource the
	// target does not serve.
	Blocked string
}

// TargetResource returns the resource the copies of view resource gvr are written as.
func (p Projection) TargetResource(gvr schema.GroupVersionResource) schema.GroupVersionResource {
	if p.Target.Resource == "" {
		return gvr
	}
	return p.Target
}

// TargetKind returns the apiVersion and kind of the copies under p, or the zero
// GroupVersionKind when they keep their own.
func (p Projection) TargetKind() schema.GroupVersionKind {
	if p.Kind == "" {
		return schema.GroupVersionKind{}
	}
	return p.Target.GroupVersion().WithKind(p.Kind)
}

// MappingVerdict is what the mapper decided about one ResourceMapping: accepted (in force) or
// not, with the reason and message of its Accepted condition (controlv1alpha1).
type MappingVerdict struct {
	Accepted        bool
	Reason, Message string
}

// Projections decides, from the ResourceMappings of a location's view (objects in the JSON
// form the view serves; keys are their contract.Key), the Projection of each source
// GroupResource that a mapping names, and the verdict on every mapping. The rules
// (docs/resourcemapping.md):
//   - a mapping that cannot be decoded is rejected (reason Invalid) and names nothing;
//   - a mapping whose source is named by no other mapping is accepted; without spec.target
//     its source is read at spec.source.version and written as it is;
//   - two or more mappings naming the same source group and resource are all rejected
//     (reason Conflict), and that resource is Blocked: neither mapping wins, and the resource
//     is not written under a guess;
//   - a mapping whose spec.naming does not compile (CompileNaming) is rejected (reason
//     InvalidNaming), and its resource is Blocked: its objects are not written at places
//     guessed without it.
//
// The result depends only on the mappings, not on their order.
func Projections(mappings map[string]*unstructured.Unstructured) (map[schema.GroupResource]Projection, map[string]MappingVerdict) {
	return projectionsWith(mappings, CompileNaming)
}

// projectionsWith is Projections with compile compiling each spec.naming (a namingCache's
// compile, so that an unchanged naming is compiled once).
func projectionsWith(mappings map[string]*unstructured.Unstructured, compile func(*controlv1alpha1.ResourceMappingNaming) (*Naming, error)) (map[schema.GroupResource]Projection, map[string]MappingVerdict) {
	verdicts := make(map[string]MappingVerdict, len(mappings))
	bySource := map[schema.GroupResource][]string{}
	specs := map[string]controlv1alpha1.ResourceMappingSpec{}
	for key, obj := range mappings {
		var rm controlv1alpha1.ResourceMapping
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &rm); err != nil {
			verdicts[key] = MappingVerdict{Reason: "Invalid", Message: "The mapping cannot be read: " + err.Error()}
			continue
		}
		src := schema.GroupResource{Group: rm.Spec.Source.Group, Resource: rm.Spec.Source.Resource}
		bySource[src] = append(bySource[src], key)
		specs[key] = rm.Spec
	}
	out := make(map[schema.GroupResource]Projection, len(bySource))
	for src, keys := range bySource {
		sort.Strings(keys)
		if len(keys) > 1 {
			msg := fmt.Sprintf("%d ResourceMappings of the location name the source resource %s (%s): none is used, and the resource is not mapped until only one names it", len(keys), src, mappingNames(keys))
			for _, k := range keys {
				verdicts[k] = MappingVerdict{Reason: controlv1alpha1.ReasonConflict, Message: msg}
			}
			out[src] = Projection{Blocked: msg}
			continue
		}
		spec := specs[keys[0]]
		p := Projection{Mapping: keys[0], SourceVersion: spec.Source.Version}
		msg := fmt.Sprintf("The objects of %s are written as they are", src.WithVersion(spec.Source.Version))
		if t := spec.Target; t != nil {
			p.Target = schema.GroupVersionResource{Group: t.Group, Version: t.Version, Resource: t.Resource}
			p.Kind = t.Kind
			msg = fmt.Sprintf("The objects of %s are written as %s (kind %s)", src.WithVersion(spec.Source.Version), p.Target, t.Kind)
		}
		naming, err := compile(spec.Naming)
		if err != nil {
			msg := fmt.Sprintf("The naming of ResourceMapping %s does not compile, and the source resource %s is not mapped until it does: %v", mappingNames(keys), src, err)
			verdicts[keys[0]] = MappingVerdict{Reason: controlv1alpha1.ReasonInvalidNaming, Message: msg}
			out[src] = Projection{Mapping: keys[0], SourceVersion: spec.Source.Version, Blocked: msg}
			continue
		}
		if _, err := compileRelatedEntries(spec); err != nil {
			msg := fmt.Sprintf("A related entry of ResourceMapping %s does not compile, and the source resource %s is not mapped until it does: %v", mappingNames(keys), src, err)
			verdicts[keys[0]] = MappingVerdict{Reason: controlv1alpha1.ReasonInvalidRelated, Message: msg}
			out[src] = Projection{Mapping: keys[0], SourceVersion: spec.Source.Version, Blocked: msg}
			continue
		}
		if p.Naming = naming; naming != nil {
			msg += fmt.Sprintf("; copies are named by spec.naming (namespace %q, name %q)", naming.spec.Namespace, naming.spec.Name)
		}
		out[src] = p
		verdicts[keys[0]] = MappingVerdict{Accepted: true, Reason: controlv1alpha1.ReasonAccepted, Message: msg}
	}
	return out, verdicts
}

// mappingNames returns the names of the mappings of keys (contract.Key values), for a message.
func mappingNames(keys []string) string {
	names := make([]string, 0, len(keys))
	for _, k := range keys {
		cluster, _, name, ok := contract.Key(k).Split()
		if !ok {
			names = append(names, k)
			continue
		}
		names = append(names, cluster+"/"+name)
	}
	return strings.Join(names, ", ")
}

// FitResources fits wanted, the view resources to map (ViewResources), to projections: the
// ResourceMappings themselves are removed (they are read, never copied), and each resource a
// mapping names is read at its spec.source.version. Resources that would be written as one
// target resource (a projection onto a resource the view also serves, or two projections onto
// one target resource) are removed too, and returned as Collisions for the caller to log and
// report: their copies would carry the same location label on the target, and each resource's
// orphan sweep would take the other's copies for orphans of its own and delete them. A resource
// left out is not mapped at all (nothing is written or deleted) until the mappings no longer
// collide. The collisions are sorted by message.
func FitResources(wanted map[schema.GroupVersionResource]bool, projections map[schema.GroupResource]Projection) (collisions []Collision) {
	delete(wanted, MappingResource)
	for gvr, namespaced := range wanted {
		if p := projections[gvr.GroupResource()]; p.SourceVersion != "" && p.SourceVersion != gvr.Version {
			delete(wanted, gvr)
			wanted[gvr.GroupResource().WithVersion(p.SourceVersion)] = namespaced
		}
	}
	byTarget := map[schema.GroupResource][]schema.GroupVersionResource{}
	for gvr := range wanted {
		t := projections[gvr.GroupResource()].TargetResource(gvr).GroupResource()
		byTarget[t] = append(byTarget[t], gvr)
	}
	for t, sources := range byTarget {
		if len(sources) < 2 {
			continue
		}
		names := make([]string, 0, len(sources))
		var mappings []string
		for _, gvr := range sources {
			names = append(names, gvr.GroupResource().String())
			if k := projections[gvr.GroupResource()].Mapping; k != "" {
				mappings = append(mappings, k)
			}
			delete(wanted, gvr)
		}
		sort.Strings(names)
		sort.Strings(mappings)
		collisions = append(collisions, Collision{Mappings: mappings,
			Message: fmt.Sprintf("the source resources %s would all be written as %s: none of them is mapped until a ResourceMapping is changed so that only one is", strings.Join(names, ", "), t)})
	}
	sort.Slice(collisions, func(i, j int) bool { return collisions[i].Message < collisions[j].Message })
	return collisions
}

// Collision is a set of source resources whose copies would be written as one target
// resource (FitResources): none of them is mapped.
type Collision struct {
	// Message says which resources and which target resource, for logs and status.
	Message string
	// Mappings are the contract.Keys of the ResourceMappings involved (sorted; a resource
	// written as itself has none).
	Mappings []string
}

func ListProjections(ctx context.Context, view dynamic.Interface) (map[schema.GroupResource]Projection, error) {
	list, err := view.Resource(MappingResource).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the ResourceMappings of the view: %w", err)
	}
	objs := make(map[string]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		u := &list.Items[i]
		objs[string(contract.NewKey(SourceOf(u, DefaultClusterName).Cluster, "", u.GetName()))] = u
	}
	projections, _ := Projections(objs)
	return projections, nil
}
