package mapper

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// relatedCopyName makes name a valid related copy name with HashedLabel: name itself when it
// is a DNS-1123 label, else its [a-z0-9-] form cut to 52 characters and suffixed with 10 hex
// digits of SHA-256(name), the rule of the copies' names (docs/resourcemapping.md, "Names").
// Every related copy name is made here.
func relatedCopyName(name string) string {
	return HashedLabel(name, name, "related")
}

// IsRelatedCopy reports whether obj, a view object, is a related copy: an object a location's
// mapper brought up from its target (it carries contract.RelatedLocationLabel). A mapper never
// copies one onto a target (Mapped).
func IsRelatedCopy(obj metav1.Object) bool {
	_, ok := obj.GetLabels()[contract.RelatedLocationLabel]
	return ok
}

// relatedObject is a related copy the view shows, with its resource.
type relatedObject struct {
	Resource schema.GroupVersionResource
	Obj      *unstructured.Unstructured
}

// relatedInputs is what planRelated decides from, for one main source object and one
// ResourceMapping; the caller reads it from synced informers only.
type relatedInputs struct {
	Location string
	// Mapping is the mapping of the location's view; nil when the (synced) view holds no
	// mapping of that name.
	Mapping *relatedMapping
	// Main is the main source object as the (synced) view shows it, nil when it does not.
	Main *unstructured.Unstructured
	// MainGone is true when a consistent read through the view confirmed that the main object
	// is not in the view (GoneFromView).
	MainGone bool
	// Releasing is true when the view shows Main deleting for the location (the deletion
	// protocol: deleted at the source, or unassigned from the location).
	Releasing bool
	// Copy is the main object's copy on the target, nil when the synced informer of the
	// target copies holds none.
	Copy *unstructured.Unstructured
	// Existing are the related copies the view shows for the main object and the mapping.
	Existing []relatedObject
}

// relatedDelete is a related copy to delete and why.
type relatedDelete struct {
	relatedObject
	Reason string
}

// relatedWrite is a related copy to create (Existing nil) or update.
type relatedWrite struct {
	Resource schema.GroupVersionResource
	Desired  *unstructured.Unstructured
	Existing *unstructured.Unstructured
}

// relatedPlan is what planRelated decided.
type relatedPlan struct {
	Writes  []relatedWrite
	Deletes []relatedDelete
	// Errors are expressions that failed: the copies of their entries are left as they are.
	Errors []error
	// Wait is true when part of the decision is still open (the main object is not in the
	// view's informer and the view has not confirmed it gone; a related target informer has
	// not synced): the caller carries out the rest and decides again shortly.
	Wait bool
}

// planRelated decides which related copies of one main object and mapping to create, update
// and delete (docs/resourcemapping.md, "Related objects: origin Target"). A copy is deleted
// only on a fact read from a synced source of truth, named in its Reason:
//   - the synced view holds no mapping of that name, or the mapping no longer has the entry;
//   - the main object is not in the view, confirmed by a consistent read through it;
//   - the view shows the main object deleting for this location (deleted or unassigned);
//   - the copy belongs to an earlier main object of the same name (another owner UID);
//   - the synced target informer holds no related object that the entry finds for the main
//     object's copy (the target object is gone, or no longer found by the entry).
//
// Nothing is written or deleted for a mapping that is not in force or cannot be compiled,
// nor for an entry whose expressions fail; without a copy of the main object on the target,
// the related copies stay as they are (the target object may still be there). list gives the
// related target objects; it answers false while their informer has not synced.
func planRelated(ctx context.Context, in relatedInputs, list relatedLister) relatedPlan {
	var p relatedPlan
	deleteAll := func(reason string) {
		for _, e := range in.Existing {
			p.Deletes = append(p.Deletes, relatedDelete{relatedObject: e, Reason: reason})
		}
	}
	switch {
	case in.Mapping == nil:
		// Precondition: the synced ResourceMappings informer of the view holds no mapping of
		// that name (the caller checks it is not merely uncompiled yet).
		deleteAll("the ResourceMapping is no longer in the location's view")
		return p
	case !in.Mapping.Accepted || in.Mapping.Err != nil:
		return p
	case in.Main == nil && !in.MainGone:
		p.Wait = true
		return p
	case in.Main == nil:
		// Precondition: the synced view informer lacks the main object and a consistent GET
		// through the view confirmed it is gone (MainGone).
		deleteAll("the main object is not in the location's view (confirmed by a consistent read)")
		return p
	case in.Releasing:
		// Precondition: the synced view shows the main object deleting for this location.
		deleteAll("the view shows the main object deleting for the location (deleted, or unassigned)")
		return p
	}
	entries := map[string]*relatedEntry{}
	for _, e := range in.Mapping.Entries {
		entries[e.Identifier] = e
	}
	byEntry := map[string]map[string]*unstructured.Unstructured{}
	for _, ex := range in.Existing {
		labels := ex.Obj.GetLabels()
		e := entries[labels[contract.RelatedIdentifierLabel]]
		switch {
		case labels[contract.RelatedOwnerUIDLabel] != string(in.Main.GetUID()):
			// Precondition: the synced view holds the main object under another UID.
			p.Deletes = append(p.Deletes, relatedDelete{relatedObject: ex, Reason: "it belongs to an earlier main object of the same name (another UID)"})
		case e == nil || e.Resource != ex.Resource:
			// Precondition: the mapping, compiled from the synced view, has no such entry.
			p.Deletes = append(p.Deletes, relatedDelete{relatedObject: ex, Reason: "the ResourceMapping no longer has its related entry"})
		default:
			if byEntry[e.Identifier] == nil {
				byEntry[e.Identifier] = map[string]*unstructured.Unstructured{}
			}
			byEntry[e.Identifier][ex.Obj.GetName()] = ex.Obj
		}
	}
	if in.Copy == nil || !Mapped(in.Main) {
		return p
	}
	for _, e := range in.Mapping.Entries {
		found, known, err := e.find(ctx, in.Copy, in.Location, list)
		if err != nil {
			p.Errors = append(p.Errors, fmt.Errorf("related entry %s: %w", e.Identifier, err))
			continue
		}
		if !known {
			p.Wait = true // decided again once the related target informer has synced
			continue
		}
		existing := byEntry[e.Identifier]
		desired := map[string]bool{}
		complete := true
		for _, t := range found {
			name, err := e.copyName(ctx, in.Main, t, in.Location)
			if err != nil {
				p.Errors = append(p.Errors, fmt.Errorf("related entry %s, target object %s: %w", e.Identifier, t.GetName(), err))
				complete = false // its copy's name is unknown: no copy of the entry is deleted
				continue
			}
			if desired[name] {
				p.Errors = append(p.Errors, fmt.Errorf("related entry %s: target object %s would be copied as %s, the name of another one's copy; it is not copied", e.Identifier, t.GetName(), name))
				continue
			}
			desired[name] = true
			want := relatedCopy(in.Main, t, in.Mapping.Name, e.Identifier, in.Location, name)
			if ex := existing[name]; ex == nil || !sameRelatedContent(ex, want) {
				p.Writes = append(p.Writes, relatedWrite{Resource: e.Resource, Desired: want, Existing: ex})
			}
		}
		if !complete {
			continue
		}
		// Precondition: the main object's copy is in the synced copies informer, the related
		// target informer has synced, and every object the entry finds got its name.
		for name, ex := range existing {
			if !desired[name] {
				p.Deletes = append(p.Deletes, relatedDelete{relatedObject: relatedObject{Resource: e.Resource, Obj: ex},
					Reason: "the synced target informer holds no related object the entry finds for the main object's copy"})
			}
		}
	}
	return p
}

// relatedCopy returns the related copy of target object related, for main source object main:
// every top-level field of related but metadata and status (a Secret's data and type, a
// ConfigMap's data and binaryData), its labels and annotations but the mapper's and kcp's
// (reserved) and droppedAnnotations, in main's namespace under name, with the marks of a related
// copy (contract.RelatedLocationLabel, RelatedOwnerUIDLabel, RelatedIdentifierLabel,
// RelatedMappingAnnotation) and an ownerReference to main, so that the source's garbage
// collector deletes it with main too.
func relatedCopy(main, related *unstructured.Unstructured, mapping, identifier, location, name string) *unstructured.Unstructured {
	out := map[string]interface{}{}
	for k, v := range related.Object {
		if k != "metadata" && k != "status" {
			out[k] = runtime.DeepCopyJSONValue(v)
		}
	}
	u := &unstructured.Unstructured{Object: out}
	u.SetName(name)
	u.SetNamespace(main.GetNamespace())
	labels := map[string]string{}
	for k, v := range related.GetLabels() {
		if !reserved(k) {
			labels[k] = v
		}
	}
	annotations := map[string]string{}
	for k, v := range related.GetAnnotations() {
		if !reserved(k) && !droppedAnnotations[k] {
			annotations[k] = v
		}
	}
	labels[contract.RelatedLocationLabel] = location
	labels[contract.RelatedOwnerUIDLabel] = string(main.GetUID())
	labels[contract.RelatedIdentifierLabel] = identifier
	annotations[contract.RelatedMappingAnnotation] = mapping
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: main.GetAPIVersion(), Kind: main.GetKind(), Name: main.GetName(), UID: main.GetUID()}})
	return u
}

// relatedMarkKey reports whether a label or annotation key of a related copy is the mapper's
// to compare and write: not reserved (kcp's and the view's bookkeeping), or a related.kcp.io key.
func relatedMarkKey(k string) bool {
	return !reserved(k) || strings.HasPrefix(k, "related.kcp.io/")
}

// sameRelatedContent reports whether the view's related copy existing holds what want (a
// relatedCopy) says: the same top-level fields but metadata and status, the same labels and
// annotations (leaving out the view's reserved ones), and want's ownerReference.
func sameRelatedContent(existing, want *unstructured.Unstructured) bool {
	fields := func(u *unstructured.Unstructured) map[string]interface{} {
		out := map[string]interface{}{}
		for k, v := range u.Object {
			if k != "metadata" && k != "status" && k != "apiVersion" && k != "kind" {
				out[k] = v
			}
		}
		return out
	}
	marks := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			if relatedMarkKey(k) {
				out[k] = v
			}
		}
		return out
	}
	if !equality.Semantic.DeepEqual(fields(existing), fields(want)) ||
		!equality.Semantic.DeepEqual(marks(existing.GetLabels()), marks(want.GetLabels())) ||
		!equality.Semantic.DeepEqual(marks(existing.GetAnnotations()), marks(want.GetAnnotations())) {
		return false
	}
	owner := want.GetOwnerReferences()[0]
	for _, ref := range existing.GetOwnerReferences() {
		if ref.UID == owner.UID && ref.Name == owner.Name && ref.Kind == owner.Kind {
			return true
		}
	}
	return false
}

// relatedUpdate returns the object of an update of related copy existing to want: want with
// existing's resourceVersion (the update's precondition), and the labels, annotations and
// ownerReferences of existing that are not the mapper's to write (the view's bookkeeping).
func relatedUpdate(existing, want *unstructured.Unstructured) *unstructured.Unstructured {
	u := want.DeepCopy()
	u.SetResourceVersion(existing.GetResourceVersion())
	u.SetUID(existing.GetUID())
	keep := func(from, into map[string]string) map[string]string {
		for k, v := range from {
			if !relatedMarkKey(k) {
				into[k] = v
			}
		}
		return into
	}
	u.SetLabels(keep(existing.GetLabels(), u.GetLabels()))
	u.SetAnnotations(keep(existing.GetAnnotations(), u.GetAnnotations()))
	refs := u.GetOwnerReferences()
	for _, ref := range existing.GetOwnerReferences() {
		if ref.UID != refs[0].UID {
			refs = append(refs, ref)
		}
	}
	u.SetOwnerReferences(refs)
	return u
}
