package view

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// A related copy is an object a location's mapper brings up from its target into the source,
// through its view, for a ResourceMapping's related entry of origin Target (the credentials
// Secret an operator made for the copy of a database; docs/resourcemapping.md, "Related
// objects"). This file is the policy of what such a copy must be (relatedRules.check); the
// writes are relatedStorage's (related_storage.go).

// resourceMappingsGR is the resource of ResourceMappings, which name the related entries.
var resourceMappingsGR = controlv1alpha1.SchemeGroupVersion.WithResource("resourcemappings").GroupResource()

// relatedMarks are the marks of a related copy (contract.RelatedLocationLabel and friends).
type relatedMarks struct {
	location, ownerUID, identifier, mapping string
}

// relatedMarksOf reads the marks of u; absent ones are "".
func relatedMarksOf(u *unstructured.Unstructured) relatedMarks {
	l := u.GetLabels()
	return relatedMarks{
		location:   l[contract.RelatedLocationLabel],
		ownerUID:   l[contract.RelatedOwnerUIDLabel],
		identifier: l[contract.RelatedIdentifierLabel],
		mapping:    u.GetAnnotations()[contract.RelatedMappingAnnotation],
	}
}

// isRelatedCopyOf reports whether u, a source object, is a related copy of location: its
// related.kcp.io/location label names location. Only such an object may location update or
// delete as a related copy.
func isRelatedCopyOf(u *unstructured.Unstructured, location string) bool {
	loc, ok := contract.RelatedCopyLocation(u.GetLabels())
	return ok && loc == location
}

// relatedRules checks related copies of one resource (info) against the objects of a
// location's view (objects: the ResourceMappings and the main objects).
type relatedRules struct {
	info    source.ResourceInfo
	objects Objects
}

// check returns nil when u, an object location asks to create or update in namespace of
// cluster, is a related copy location may write (docs/views.md, "Related copies"):
//   - it carries related.kcp.io/location=<location> (the caller made sure), a non-empty
//     related.kcp.io/owner-uid and related.kcp.io/identifier, and the annotation
//     related.kcp.io/mapping;
//   - the view serves ResourceMappings, and location's view holds the one the annotation names,
//     in cluster, with a related entry of that identifier, of origin Target and of u's resource
//     (group and resource: the source serves it at its own version);
//   - metadata.ownerReferences is exactly one reference, to the main object: apiVersion the
//     mapping's spec.source group and version, the kind of that resource, a name, and the uid
//     of the owner-uid label;
//   - that main object is in location's view, in cluster and namespace, assigned to location
//     (not only shown for its finalizer), with that uid.
//
// Errors: 403 Forbidden naming the rule that does not hold; 503 with a Retry-After while the
// ResourceMappings or the main resource have not synced.
func (r relatedRules) check(ctx context.Context, location, cluster, namespace string, u *unstructured.Unstructured) error {
	gr := r.info.GVR.GroupResource()
	name := u.GetName()
	if name == "" {
		name = u.GetGenerateName()
	}
	refuse := func(format string, args ...interface{}) error {
		return apierrors.NewForbidden(gr, name, fmt.Errorf("a related copy of location %q: %s", location, fmt.Sprintf(format, args...)))
	}
	m := relatedMarksOf(u)
	switch {
	case m.ownerUID == "":
		return refuse("the label %s must name the uid of the main object", contract.RelatedOwnerUIDLabel)
	case m.identifier == "":
		return refuse("the label %s must name the ResourceMapping's related entry", contract.RelatedIdentifierLabel)
	case m.mapping == "":
		return refuse("the annotation %s must name the ResourceMapping", contract.RelatedMappingAnnotation)
	}
	mappings, ok := r.store(resourceMappingsGR)
	if !ok {
		return refuse("this server's views do not serve %s, so no ResourceMapping can name a related copy (mapper-apiserver --resources must name it)", resourceMappingsGR)
	}
	if err := synced(mappings, resourceMappingsGR); err != nil {
		return err
	}
	obj, _, ok := mappings.GetInCluster(location, cluster, "", m.mapping)
	if !ok {
		return refuse("the ResourceMapping %q named by %s is not in the view of the location", contract.Truncate(m.mapping, maxQuoted), contract.RelatedMappingAnnotation)
	}
	content, err := obj.Content()
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	var rm controlv1alpha1.ResourceMapping
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(content.Object, &rm); err != nil {
		return refuse("the ResourceMapping %q cannot be read: %v", m.mapping, err)
	}
	var entry *controlv1alpha1.RelatedResource
	for i := range rm.Spec.Related {
		if rm.Spec.Related[i].Identifier == m.identifier {
			entry = &rm.Spec.Related[i]
		}
	}
	switch {
	case entry == nil:
		return refuse("the ResourceMapping %q has no related entry %q (label %s)", m.mapping, contract.Truncate(m.identifier, maxQuoted), contract.RelatedIdentifierLabel)
	case entry.Origin != controlv1alpha1.RelatedOriginTarget:
		return refuse("the related entry %q of ResourceMapping %q is of origin %s: only objects of origin %s are brought up", m.identifier, m.mapping, entry.Origin, controlv1alpha1.RelatedOriginTarget)
	case entry.Resource.Group != gr.Group || entry.Resource.Resource != gr.Resource:
		return refuse("the related entry %q of ResourceMapping %q is of resource %s, not %s", m.identifier, m.mapping, schema.GroupResource{Group: entry.Resource.Group, Resource: entry.Resource.Resource}, gr)
	}
	mainGR := schema.GroupResource{Group: rm.Spec.Source.Group, Resource: rm.Spec.Source.Resource}
	mainInfo, ok := r.resource(mainGR)
	if !ok {
		return refuse("the main resource %s of ResourceMapping %q is not served by the view", mainGR, m.mapping)
	}
	mainStore, _ := r.objects.Store(mainInfo.GVR)
	if mainStore == nil {
		return refuse("the main resource %s of ResourceMapping %q is not served by the view", mainGR, m.mapping)
	}
	if err := synced(mainStore, mainGR); err != nil {
		return err
	}
	refs := u.GetOwnerReferences()
	wantAPIVersion := schema.GroupVersion{Group: rm.Spec.Source.Group, Version: rm.Spec.Source.Version}.String()
	if len(refs) != 1 {
		return refuse("metadata.ownerReferences must be exactly one reference, to the main object (apiVersion %s, kind %s, its name and uid); there are %d", wantAPIVersion, mainInfo.Kind, len(refs))
	}
	ref := refs[0]
	if ref.APIVersion != wantAPIVersion || ref.Kind != mainInfo.Kind || ref.Name == "" || string(ref.UID) != m.ownerUID {
		return refuse("metadata.ownerReferences[0] must name the main object: apiVersion %s, kind %s, its name, and uid %q (label %s)", wantAPIVersion, mainInfo.Kind, contract.Truncate(m.ownerUID, maxQuoted), contract.RelatedOwnerUIDLabel)
	}
	main, _, ok := mainStore.GetInCluster(location, cluster, namespace, ref.Name)
	if !ok || string(main.UID()) != m.ownerUID || !contract.HasLocation(main.Locations(), location) {
		return refuse("the main object %s %q with uid %q is not assigned to the location in namespace %q", mainGR, contract.Truncate(ref.Name, maxQuoted), contract.Truncate(m.ownerUID, maxQuoted), namespace)
	}
	return nil
}

// store returns the Store of the mirrored resource gr (at whatever version it is mirrored).
func (r relatedRules) store(gr schema.GroupResource) (Store, bool) {
	info, ok := r.resource(gr)
	if !ok {
		return nil, false
	}
	return r.objects.Store(info.GVR)
}

// resource returns the mirrored resource gr.
func (r relatedRules) resource(gr schema.GroupResource) (source.ResourceInfo, bool) {
	for _, info := range r.objects.Resources() {
		if info.GVR.GroupResource() == gr {
			return info, true
		}
	}
	return source.ResourceInfo{}, false
}

// synced is the 503 (Retry-After 1 s) of a check that needs a resource whose first list is not
// stored yet: its objects cannot be told absent.
func synced(s Store, gr schema.GroupResource) error {
	if s.HasSynced() {
		return nil
	}
	err := apierrors.NewServiceUnavailable(fmt.Sprintf("%s has not been read from the source yet; retry", gr))
	err.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: 1}
	return err
}
