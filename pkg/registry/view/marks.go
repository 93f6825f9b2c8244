package view

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// A location writes on the object itself, through its view, only its own marks (docs/views.md,
// "Writes through a view"; docs/design.md, "The location view"): its finalizer
// locations.mapper.kcp.io/<location> and its apply outcome record outcome.kcp.io/<location>.
// markChange is that policy over the location's view of the object before a write (old) and
// the object the write asks for (new): every other difference is refused, so that the rest of
// the object is written in the source cluster only. A later kind of mark (another owned key)
// is one more entry in withoutOwnedParts.

// markChange is what a write through the view changes of the location's own marks.
type markChange struct {
	// finalizer is +1 when the write adds the location's finalizer, -1 when it removes it, 0
	// when it leaves it as it is.
	finalizer int
	// outcome is +1 when the write sets the location's outcome record to outcomeRecord
	// (new, or a new value), -1 when it removes it, 0 when it leaves it as it is.
	outcome       int
	outcomeRecord string
}

// changes reports whether the write changes a mark at all.
func (c markChange) changes() bool { return c.finalizer != 0 || c.outcome != 0 }

// errNotOwnMarks is the reason a write is refused: it changes more than the location's marks.
type errNotOwnMarks struct {
	location string
	// what names the first part of the object found changed.
	what string
}

func (e *errNotOwnMarks) Error() string {
	return fmt.Sprintf("a write of the object itself through the view of location %q may only add or remove the location's own finalizer %s or its own outcome record %s; this one changes %s",
		e.location, contract.LocationFinalizer(e.location), contract.OutcomeAnnotation(e.location), e.what)
}

// markChangeOf compares old, location's view of the object, with new, the object a write asks
// for, and returns the change of location's marks. A new outcome record is not checked here
// (checkOutcomeRecord is). It returns an *errNotOwnMarks when new
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
	key := contract.OutcomeAnnotation(location)
	was, hadRecord := old.GetAnnotations()[key]
	is, hasRecord := new.GetAnnotations()[key]
	switch {
	case hasRecord && (!hadRecord || is != was):
		c.outcome, c.outcomeRecord = 1, is
	case hadRecord && !hasRecord:
		c.outcome = -1
	}
	a, b := withoutOwnedParts(old, location), withoutOwnedParts(new, location)
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

// withoutOwnedParts returns a copy of u without the parts markChangeOf leaves out: location's
// own finalizer and outcome record, metadata.resourceVersion, metadata.generation and
// metadata.managedFields.
func withoutOwnedParts(u *unstructured.Unstructured, location string) *unstructured.Unstructured {
	c := u.DeepCopy()
	for _, f := range []string{"resourceVersion", "generation", "managedFields"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	own := contract.LocationFinalizer(location)
	fins := slices.DeleteFunc(c.GetFinalizers(), func(f string) bool { return f == own })
	if len(fins) == 0 {
		fins = nil // no member, as an object without finalizers is written
	}
	c.SetFinalizers(fins)
	ann := c.GetAnnotations()
	delete(ann, contract.OutcomeAnnotation(location))
	if len(ann) == 0 {
		ann = nil // no member, as an object without annotations is written
	}
	c.SetAnnotations(ann)
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
// location's finalizer appended or removed, its outcome record set or removed. Nothing else of
// current changes.
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
	if change.outcome != 0 {
		ann := target.GetAnnotations()
		if change.outcome > 0 {
			if ann == nil {
				ann = map[string]string{}
			}
			ann[contract.OutcomeAnnotation(location)] = change.outcomeRecord
		} else {
			delete(ann, contract.OutcomeAnnotation(location))
		}
		if len(ann) == 0 {
			ann = nil
		}
		target.SetAnnotations(ann)
	}
	return target
}

// writeMarks writes change, a change of location's marks, onto current, the source object
// the change was decided on, with one JSON merge patch through client: the finalizer list as
// withMarkChange makes it from current's, location's outcome record set or removed, and
// current's metadata.resourceVersion. kube-apiserver's update path takes the patched object's
// resourceVersion as a precondition (the registry's update answers 409 Conflict when the
// object's resourceVersion moved since: k8s.io/apiserver's generic registry Store.Update, as
// for a PUT), so the finalizer list it replaces is exactly the one current holds: a finalizer
// another writer added since is never lost. It returns the written object, or the source's
// error (409 when current is stale, 422 when the source refuses a new finalizer on an object
// it is deleting).
func writeMarks(ctx context.Context, client dynamic.ResourceInterface, current *unstructured.Unstructured, location string, change markChange) (*unstructured.Unstructured, error) {
	meta := map[string]interface{}{"resourceVersion": current.GetResourceVersion()}
	target := withMarkChange(current, location, change)
	if change.finalizer != 0 {
		var fins interface{} // JSON null: no finalizers left, the member goes
		if f := target.GetFinalizers(); len(f) > 0 {
			fins = f
		}
		meta["finalizers"] = fins
	}
	if change.outcome != 0 {
		var record interface{} // JSON null: the merge patch removes the annotation
		if change.outcome > 0 {
			record = change.outcomeRecord
		}
		meta["annotations"] = map[string]interface{}{contract.OutcomeAnnotation(location): record}
	}
	patch, err := json.Marshal(map[string]interface{}{"metadata": meta})
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return client.Patch(ctx, current.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
}

// checkOutcomeRecord refuses a change that sets an outcome record the contract does not allow
// (docs/design.md, "Status records"): larger than contract.MaxOutcomeRecordBytes (413
// RequestEntityTooLarge, so that no location uses up the object's annotation budget), or not
// an outcome record (400 BadRequest, contract.ParseOutcomeRecord's reason). Nothing is written.
func checkOutcomeRecord(gr schema.GroupResource, name, location string, change markChange) error {
	if change.outcome <= 0 {
		return nil
	}
	key := contract.OutcomeAnnotation(location)
	if n := len(change.outcomeRecord); n > contract.MaxOutcomeRecordBytes {
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
			"%s %q: the outcome record of location %q is %d bytes; the annotation %s holds at most %d bytes",
			gr.String(), name, location, n, key, contract.MaxOutcomeRecordBytes))
	}
	if _, err := contract.ParseOutcomeRecord(change.outcomeRecord); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("%s %q: the annotation %s: %v", gr.String(), name, key, err))
	}
	return nil
}
