package cache

import (
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// The deletion protocol (docs/views.md, "Deletion"; docs/design.md, "The location view"): a
// location's mapper adds its finalizer, locations.mapper.kcp.io/<location>, to a source object
// through its view before it first creates a copy, and removes it once its copy is gone. So
//
//   - a location's view shows an object while it is assigned to the location (and not withheld
//     from it; assigned means bound too, bound.go) or carries the location's finalizer. A
//     location adds its finalizer only while the object is assigned to it (the writes through
//     a view check ResourceStore.Assignment), so an object carries the finalizer of a location
//     its namespace is not bound to when the binding went after the location made its copy
//     (that view then shows it deleting, as any unassignment), or when someone who may write
//     the object wrote that finalizer at the source (the location's mapper, finding no copy
//     of its own, removes it);
//   - the view shows it with metadata.deletionTimestamp set (deletionShown) when it carries the
//     location's finalizer and either is no longer assigned to the location, or is being
//     deleted at the source with no finalizer left but locations' (other controllers'
//     finalizers run first); it shows no deletionTimestamp otherwise, so that no mapper deletes
//     a copy while the source object waits for another controller;
//   - the time shown is a function of the source object's current version alone, so every
//     replica shows the same and a restart changes nothing: the source's own
//     deletionTimestamp when it has one, else (unassigned) its creationTimestamp. No field of
//     the object records when the assignment went (managedFields times move with every later
//     write, and the cache drops them), and a restarted server has no history: the view does
//     not pretend to know. The time says "deletion requested" and nothing more;
//   - the view shows metadata.finalizers without other locations' finalizers (no member when
//     none is left), and
//     kcp.io/assigned-locations as ["<location>"] while assigned, [] once unassigned.

// deletionMarks is what the deletion protocol reads of an object version: the locations whose
// finalizer it carries, whether it carries finalizers of anyone else, and whether the source
// is deleting it. An Object without finalizers and deletionTimestamp has none (nil).
type deletionMarks struct {
	// finalized are the locations whose finalizer the object carries, sorted, de-duplicated.
	finalized []string
	// others: the object carries a finalizer that is no location's.
	others bool
	// deleting: metadata.deletionTimestamp is set at the source.
	deleting bool
	// deletedAt is the source's metadata.deletionTimestamp in Unix seconds (the precision of
	// its JSON) when deleting: the time a view showing the deletion shows (the time changes
	// the view, deletionOwners).
	deletedAt int64
}

// marksOf returns the deletion marks of an object with finalizers whose deletionTimestamp at
// the source is deletedAt (nil: not deleting); nil when there is nothing to record (no
// finalizer, not deleting).
func marksOf(finalizers []string, deletedAt *metav1.Time) *deletionMarks {
	if len(finalizers) == 0 && deletedAt == nil {
		return nil
	}
	m := &deletionMarks{deleting: deletedAt != nil}
	if deletedAt != nil {
		m.deletedAt = deletedAt.Unix()
	}
	for _, f := range finalizers {
		if loc, ok := contract.FinalizerLocation(f); ok {
			// A copy: the stored version keeps it, not the decoder's string (ownStrings).
			m.finalized = append(m.finalized, strings.Clone(loc))
		} else {
			m.others = true
		}
	}
	slices.Sort(m.finalized)
	m.finalized = slices.Compact(m.finalized)
	return m
}

// marksOfObject returns the deletion marks of u (marksOf).
func marksOfObject(u *unstructured.Unstructured) *deletionMarks {
	return marksOf(u.GetFinalizers(), u.GetDeletionTimestamp())
}

// holds reports whether the object carries location's finalizer.
func (m *deletionMarks) holds(location string) bool {
	return m != nil && contract.HasLocation(m.finalized, location)
}

// deletionShown reports whether location's view shows the object with a deletionTimestamp:
// it carries location's finalizer and is not assigned there any more (assigned are the
// object's assigned locations), or the source is deleting it and no finalizer but locations'
// is left.
func (m *deletionMarks) deletionShown(assigned []string, location string) bool {
	if !m.holds(location) {
		return false
	}
	return !contract.HasLocation(assigned, location) || (m.deleting && !m.others)
}

// viewLocations returns the locations whose views show an object assigned to assigned, of
// which shown are those its rendering does not withhold it from (sorted), with these marks:
// shown, and the locations whose finalizer it carries that it is not assigned to (an assigned
// location that withholds the object keeps withholding it: its view cannot show it as it would
// land on the target, render.go). It returns shown itself when it adds nothing.
func (m *deletionMarks) viewLocations(assigned, shown []string) []string {
	if m == nil {
		return shown
	}
	var out []string
	for _, loc := range m.finalized {
		if !contract.HasLocation(assigned, loc) {
			if out == nil {
				out = slices.Clone(shown)
			}
			out = append(out, loc)
		}
	}
	if out == nil {
		return shown
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// sameInEveryView reports whether no view of an object assigned to assigned differs from it
// in deletion: no view shows a deletionTimestamp the source does not have, or hides one it
// has, and every location whose finalizer it carries is assigned (a view is then the object
// with its assignment and finalizers filled in per location, template.go).
func (m *deletionMarks) sameInEveryView(assigned []string) bool {
	if m == nil {
		return true
	}
	if m.deleting {
		return false
	}
	for _, loc := range m.finalized {
		if !contract.HasLocation(assigned, loc) {
			return false
		}
	}
	return true
}

// hidesFinalizers reports whether location's view leaves out some of the object's finalizers
// (other locations').
func (m *deletionMarks) hidesFinalizers(location string) bool {
	if m == nil {
		return false
	}
	for _, loc := range m.finalized {
		if loc != location {
			return true
		}
	}
	return false
}

// viewFinalizers returns the finalizers location's view shows of an object whose finalizers
// are finalizers: all but other locations' (none: the view has no metadata.finalizers).
func viewFinalizers(finalizers []string, location string) []string {
	var out []string
	for _, f := range finalizers {
		if loc, ok := contract.FinalizerLocation(f); ok && loc != location {
			continue
		}
		out = append(out, f)
	}
	return out
}

// applyDeletionView changes u, a copy location's view is made of (viewOf), as the deletion
// protocol shows it to location: finalizers of other locations left out, deletionTimestamp set
// or removed (deletionShown, with the time described at the top of this file).
func applyDeletionView(u *unstructured.Unstructured, assigned []string, location string) {
	m := marksOfObject(u)
	if m == nil {
		return
	}
	if m.hidesFinalizers(location) {
		u.SetFinalizers(viewFinalizers(u.GetFinalizers(), location)) // none: no member
	}
	switch {
	case !m.deletionShown(assigned, location):
		unstructured.RemoveNestedField(u.Object, "metadata", "deletionTimestamp")
		unstructured.RemoveNestedField(u.Object, "metadata", "deletionGracePeriodSeconds")
	case !m.deleting:
		t := u.GetCreationTimestamp()
		if t.IsZero() {
			t = metav1.NewTime(time.Unix(0, 0).UTC())
		}
		u.SetDeletionTimestamp(&t)
		zero := int64(0)
		u.SetDeletionGracePeriodSeconds(&zero)
	}
}

// deletionOwners returns the locations whose views of prev or obj, two versions of an object,
// differ from the common view (LocationView for no location, visible.go) by what the deletion
// protocol shows them: the locations whose finalizer either version carries. With changedOnly
// it returns only those that see their finalizer, their deletionTimestamp (whether it is
// shown, or the time shown) or their assignment value change between the versions (each
// shows the common view plus these).
func deletionOwners(prev, obj *Object, changedOnly bool) []string {
	var out []string
	for _, o := range []*Object{prev, obj} {
		if o.marks != nil {
			out = append(out, o.marks.finalized...)
		}
	}
	if !changedOnly {
		return out
	}
	return slices.DeleteFunc(out, func(loc string) bool {
		shown := prev.marks.deletionShown(prev.assigned, loc)
		return prev.marks.holds(loc) == obj.marks.holds(loc) &&
			shown == obj.marks.deletionShown(obj.assigned, loc) &&
			(!shown || prev.marks.sameDeletionTime(obj.marks)) &&
			contract.HasLocation(prev.assigned, loc) == contract.HasLocation(obj.assigned, loc)
	})
}

// sameDeletionTime reports whether a view showing the deletion of two versions of an object,
// with marks m and n, shows the same time: the source's deletionTimestamp when it is deleting
// the object, else the creationTimestamp, which never changes (applyDeletionView). An object
// unassigned from a location that still holds it, and then deleted at the source, changes
// that location's view from the one to the other; kube-apiserver may also move a
// deletionTimestamp earlier (a second delete with a shorter grace period).
func (m *deletionMarks) sameDeletionTime(n *deletionMarks) bool {
	// Both are non-nil: deletionShown needs a location's finalizer.
	return m.deleting == n.deleting && m.deletedAt == n.deletedAt
}

// PendingDeletion is an object that a location's view started showing deleting: the location's
// copy is to be deleted, and the object waits for the location's finalizer to go.
type PendingDeletion struct {
	// GVR is the object's resource.
	GVR schema.GroupVersionResource
	// Cluster, Namespace, Name and UID identify the object.
	Cluster, Namespace, Name string
	UID                      types.UID
	// Location is the location the object waits for.
	Location string
}

// DeletionPending reports whether location's view shows this object version deleting: it
// carries the location's finalizer and is no longer assigned there, or is deleted at the
// source with only locations' finalizers left (deletion.go).
func (o *Object) DeletionPending(location string) bool {
	return o.HasLocation(location) && o.marks.deletionShown(o.assigned, location)
}

// pendingChangedLocked records that location's pending deletions changed by delta at the
// event storing obj: the gauge of pending deletions, and for a new one StoreOptions.DeletionPending.
// Called with s.mu held for writing.
func (s *ResourceStore) pendingChangedLocked(location string, delta int, obj *Object) {
	pendingDeletions.WithLabelValues(location).Add(float64(delta))
	if delta > 0 && s.opts.DeletionPending != nil {
		s.opts.DeletionPending(PendingDeletion{GVR: s.gvr, Cluster: obj.cluster, Namespace: obj.namespace, Name: obj.name, UID: obj.uid, Location: location})
	}
}
