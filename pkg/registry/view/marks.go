package view

import (
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// A location writes on the object itself, through its view, only its own marks (docs/views.md,
// "Writes through a view"; docs/design.md, "The location view"): its finalizer
// locations.mapper.kcp.io/<location>. markChange is that policy over the location's view of
// the object before a write (old) and the object the write asks for (new): every other
// difference is refused, so that the rest of the object is written in the source cluster only.
// A later kind of mark (another owned key) is one more entry in ownedParts.

// markChange is what a write through the view changes of the location's own marks.
type markChange struct {
	// finalizer is +1 when the write adds the location's finalizer, -1 when it removes it, 0
	// when it leaves it as it is.
	finalizer int
}

// changes reports whether the write changes a mark at all.
func (c markChange) changes() bool { return c.finalizer != 0 }

// errNotOwnMarks is the reason a write is refused: it changes more than the location's marks.
type errNotOwnMarks struct {
	location string
	// what names the first part of the object found changed.
	what string
}

func (e *errNotOwnMarks) Error() string {
	return fmt.Sprintf("a write of the object itself through the view of location %q may only add or remove the location's own finalizer %s; this one changes %s",
		e.location, contract.LocationFinalizer(e.location), e.what)
}

// markChangeOf compares old, location's view of the object, with new, the object a write asks
// for, and returns the change of location's marks. It returns an *errNotOwnMarks when new
// differs from old anywhere else, leaving out what a client cannot set on a view's object in
// any case: metadata.resourceVersion (checked as a precondition), metadata.generation (a view
// may show an older one, docs/views.md) and metadata.managedFields (the write's field manager
// fills them; views never show them).
func markChangeOf(old, new *unstructured.Unstructured, location string) (markChange, error) {
	own := contract.LocationFinalizer(location)
	had, has := slices.Contains(old.GetFinalizers(), own), slices.Contains(new.GetFinalizers(), own)
	var c markChange
	switch {
	case has && !had:
		c.finalizer = 1
	case had && !has:
		c.finalizer = -1
	}
	a, b := withoutOwnedParts(old, own), withoutOwnedParts(new, own)
	for _, k := range unionKeys(a.Object, b.Object) {
		if k == "metadata" {
			continue
		}
		if !reflect.DeepEqual(a.Object[k], b.Object[k]) {
			return markChange{}, &errNotOwnMarks{location: location, what: k}
		}
	}
	am, _ := a.Object["metadata"].(map[string]interface{})
	bm, _ := b.Object["metadata"].(map[string]interface{})
	for _, k := range unionKeys(am, bm) {
		if !reflect.DeepEqual(am[k], bm[k]) {
			return markChange{}, &errNotOwnMarks{location: location, what: "metadata." + k}
		}
	}
	return c, nil
}

// withoutOwnedParts returns a copy of u without the parts markChangeOf leaves out: the
// location's own finalizer own, metadata.resourceVersion, metadata.generation and
// metadata.managedFields.
func withoutOwnedParts(u *unstructured.Unstructured, own string) *unstructured.Unstructured {
	c := u.DeepCopy()
	for _, f := range []string{"resourceVersion", "generation", "managedFields"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	fins := slices.DeleteFunc(c.GetFinalizers(), func(f string) bool { return f == own })
	if len(fins) == 0 {
		fins = nil // no member, as an object without finalizers is written
	}
	c.SetFinalizers(fins)
	return c
}

// unionKeys returns the keys of a and b (either may be nil), sorted.
func unionKeys(a, b map[string]interface{}) []string {
	out := make([]string, 0, len(a)+len(b))
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// withMarkChange returns a copy of current, the source object, with change applied: the
// location's finalizer appended or removed. Nothing else of current changes.
func withMarkChange(current *unstructured.Unstructured, location string, change markChange) *unstructured.Unstructured {
	own := contract.LocationFinalizer(location)
	target := current.DeepCopy()
	fins := target.GetFinalizers()
	switch {
	case change.finalizer > 0 && !slices.Contains(fins, own):
		fins = append(fins, own)
	case change.finalizer < 0:
		fins = slices.DeleteFunc(fins, func(f string) bool { return f == own })
	}
	if len(fins) == 0 {
		fins = nil
	}
	target.SetFinalizers(fins)
	return target
}
