package cache

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// LocationView returns a copy of u (a source object assigned to locations) as location's view
// shows it without Customizations: RenderView, or when location's spec-diff.kcp.io/ patch
// cannot be applied, the view without it. ResourceStore.LocationView adds the store's
// Customizations; the cache serves Object.ForLocation, which keeps the last rendering that
// succeeded.
func LocationView(u *unstructured.Unstructured, locations []string, location string) *unstructured.Unstructured {
	if v, err := RenderView(u, locations, location); err == nil {
		return v
	}
	return baseView(u, locations, location)
}

// RenderView returns a copy of u (a source object assigned to locations) as location's view
// shows it without Customizations: baseView, then location's own patch
// spec-diff.kcp.io/<location> applied (docs/design.md, "The control plane objects"), within
// rendercheck.DefaultMaxBytes. The error is a *specdiff.Error when the patch cannot be applied
// or is refused, a *customization.RenderError when the result is too large.
func RenderView(u *unstructured.Unstructured, locations []string, location string) (*unstructured.Unstructured, error) {
	return renderFor(context.Background(), nil, schema.GroupVersionResource{}, "", u, locations, location, 0)
}

// baseView returns a copy of u as location's view shows it before any rendering: the status
// rules and the hidden annotations of Object.ForLocation.
func baseView(u *unstructured.Unstructured, locations []string, location string) *unstructured.Unstructured {
	return viewOf(u, locations, location, false)
}

// viewOf is baseView, keeping location's own spec-diff.kcp.io/<location> annotation when
// keepOwnPatch is set (the input of a rendering, which applies and then removes it).
func viewOf(u *unstructured.Unstructured, locations []string, location string, keepOwnPatch bool) *unstructured.Unstructured {
	u = u.DeepCopy()
	if ann := u.GetAnnotations(); contract.ReflectsStatus(ann) || contract.HasStatusRecords(ann) {
		status, ok, err := contract.StatusRecord(ann, location)
		switch {
		case ok && err == nil:
			u.Object["status"] = status
		case len(locations) > 1:
			delete(u.Object, "status")
		}
	}
	unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	ann := u.GetAnnotations()
	for k, v := range ann {
		if hiddenAnnotation(k, v, location) && !(keepOwnPatch && k == contract.SpecDiffAnnotationPrefix+location) {
			delete(ann, k)
		}
	}
	if _, has := ann[contract.AssignedLocationsAnnotation]; has {
		ann[contract.AssignedLocationsAnnotation] = assignmentShown(locations, location)
	}
	u.SetAnnotations(ann)
	applyDeletionView(u, locations, location)
	return u
}

// assignmentShown is the kcp.io/assigned-locations value location's view of an object assigned
// to locations shows: ["<location>"] while it is assigned there, [] when it is shown for its
// finalizer alone (deletion.go).
func assignmentShown(locations []string, location string) string {
	if contract.HasLocation(locations, location) {
		return assignedToOnly(location)
	}
	return "[]"
}

// hiddenAnnotation reports whether location's view drops the annotation k (value v): docs/design.md
// "The location view" — every status record (a location's own record is
// shown as .status), every spec-diff.kcp.io/ patch (location's own is applied, not shown),
// kcp.io/status-location unless it names location, other locations' outcome.kcp.io/ records,
// and kubectl's last-applied-configuration (a
// kubectl apply round trip of the source object copies every annotation into it).
func hiddenAnnotation(k, v, location string) bool {
	if k == contract.LastAppliedConfigAnnotation || strings.HasPrefix(k, contract.StatusRecordAnnotationPrefix) ||
		strings.HasPrefix(k, contract.SpecDiffAnnotationPrefix) {
		return true
	}
	owner, ok := annotationOwner(k, v)
	return ok && owner != location
}

// annotationOwner returns the location an annotation k (value v) belongs to, the only view in
// which it can show: status.kcp.io/<location> (shown as that location's .status),
// spec-diff.kcp.io/<location>, kcp.io/status-location: <location>, and the apply outcome
// record outcome.kcp.io/<location> (shown as it is in that location's view: the mapper reads
// it there to write it only when it changes). ok is false for every other annotation, which
// shows in every view or in none.
func annotationOwner(k, v string) (location string, ok bool) {
	if k == contract.StatusLocationAnnotation {
		return v, true
	}
	if loc, ok := strings.CutPrefix(k, contract.StatusRecordAnnotationPrefix); ok {
		return loc, true
	}
	if loc, ok := strings.CutPrefix(k, contract.OutcomeAnnotationPrefix); ok {
		return loc, true
	}
	return strings.CutPrefix(k, contract.SpecDiffAnnotationPrefix)
}

// assignedToOnly is the kcp.io/assigned-locations value a view of location shows:
// ["<location>"].
func assignedToOnly(location string) string {
	b, _ := json.Marshal([]string{location})
	return string(b)
}

// dropManagedFields removes metadata.managedFields from an ingested object. No view shows them
// (they name other locations' status records and their fields), and nothing else reads them
// from the cache: the status reconciler's writes without managedFields keep the live ones
// (kube-apiserver's field manager falls back to the live object's managedFields when an update
// carries none). Dropping them at ingest also saves their memory and spares an object whose
// only per-location difference they would be a copy per location.
func dropManagedFields(u *unstructured.Unstructured) {
	if meta, ok := u.Object["metadata"].(map[string]interface{}); ok {
		if _, has := meta["managedFields"]; has {
			// Only then: a version without them (the common case here) is never written to,
			// so an object handed to the store again (a relist of a stored version) is not
			// changed while readers copy it.
			delete(meta, "managedFields")
		}
	}
}

// locationVariants holds the per-location views of one object version that needs them.
type locationVariants struct {
	mu sync.Mutex
	m  map[string]*Object
}

// needsVariants reports whether the object looks different per location (LocationView would
// change it): it is assigned to several locations (each view names only itself in
// kcp.io/assigned-locations), carries status records, a last-applied-configuration, a
// kcp.io/status-location or spec-diff.kcp.io/ patch that not every view shows, managedFields,
// or an assignment annotation that is not exactly ["<location>"], or its finalizers and
// deletion (marks) do not show the same in every view (deletion.go). An object assigned to one
// location that carries none of these is shown as it is, without a copy.
func needsVariants(u *unstructured.Unstructured, locations []string, marks *deletionMarks) bool {
	if !marks.sameInEveryView(locations) {
		return true
	}
	if len(locations) == 0 {
		return false // in no view
	}
	if len(locations) > 1 || marks.hidesFinalizers(locations[0]) {
		return true
	}
	if meta, ok := u.Object["metadata"].(map[string]interface{}); ok && meta["managedFields"] != nil {
		return true
	}
	only := locations[0]
	for k, v := range u.GetAnnotations() {
		if hiddenAnnotation(k, v, only) {
			return true
		}
		if k == contract.AssignedLocationsAnnotation && v != assignedToOnly(only) {
			return true
		}
	}
	return false
}

// statusDiffers reports whether the object's .status differs per location: it carries status
// records, or reflects status while assigned to several locations (then .status is some
// location's, or nobody's).
func statusDiffers(u *unstructured.Unstructured, locations []string) bool {
	ann := u.GetAnnotations()
	return contract.HasStatusRecords(ann) || (contract.ReflectsStatus(ann) && len(locations) > 1)
}

// ForLocation returns the object as location's view shows it (docs/design.md, "The location view";
// docs/status.md): a location sees its own status in .status and never another location's. For
// an object assigned to one location that carries nothing to hide that is the object itself.
// Otherwise (see needsVariants) it is a copy, built once per location and object version (and
// so encoded once per location and version, see CacheEncode), in which
//   - when the object reflects status or carries status records: .status is location's record
//     if there is one; otherwise the source's .status when the object is assigned to that
//     location alone, and no .status when it is assigned to several;
//   - no status.kcp.io/ annotation is left;
//   - nothing names or shows another location (docs/design.md, "The location view"):
//     kcp.io/assigned-locations is ["<location>"], kcp.io/status-location is kept only when it
//     names location, other locations' spec-diff.kcp.io/ patches, metadata.managedFields and
//     kubectl.kubernetes.io/last-applied-configuration are removed;
//   - location's own spec-diff.kcp.io/<location> patch is applied and removed (RenderView); when
//     it cannot be applied the view keeps the last rendering that succeeded (see render.go).
//
// A record that is not a JSON object counts as no record. Its metadata.resourceVersion is the
// location's visible resourceVersion (VisibleResourceVersion), and its metadata.generation the
// generation the object had there (VisibleGeneration): the view of a location does not
// change, in content or resourceVersion, when only what it cannot see changed (visible.go).
func (o *Object) ForLocation(location string) *Object {
	if v, ok := o.renderedFor(location); ok {
		return v
	}
	o.variants.mu.Lock()
	defer o.variants.mu.Unlock()
	if v, ok := o.variants.m[location]; ok { // rendered meanwhile
		return v
	}
	v := o.render(location)
	if o.variants.m == nil {
		o.variants.m = map[string]*Object{}
	}
	o.variants.m[location] = v
	return v
}

// renderedFor returns what ForLocation returns when that costs no rendering: o itself when it
// looks the same to every location, or the location's view made before; ok false otherwise.
func (o *Object) renderedFor(location string) (v *Object, ok bool) {
	if o.variants == nil {
		return o, true
	}
	o.variants.mu.Lock()
	defer o.variants.mu.Unlock()
	v, ok = o.variants.m[location]
	return v, ok
}

// render builds the view of location (ForLocation) from the template or from the object.
func (o *Object) render(location string) *Object {
	if o.hole.end > 0 {
		return o.templateView(location)
	}
	u := o.view(location)
	rv := o.VisibleResourceVersion(location)
	if s := strconv.FormatUint(rv, 10); u.GetResourceVersion() != s {
		u.SetResourceVersion(s)
	}
	// Shown with the generation the location saw: this version's generation may have moved
	// since (a status record of another location on a Deployment), and a kept rendering of an
	// older version (lastGood) holds that version's; every version that shows the location
	// this resourceVersion shows it with one generation (VisibleGeneration).
	setGeneration(u, o.ViewGeneration(location))
	v := newObject(o.key, o.cluster, o.namespace, o.name, o.assigned, rv, u)
	v.locations, v.marks, v.sourceRV = o.locations, o.marks, o.rv
	v.variants, v.statusDiffers = nil, false
	v.compact(nil) // bytes only
	return v
}
