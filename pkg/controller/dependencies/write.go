package dependencies

import (
	"context"
	"encoding/json"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/managedfields"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/worker"
)

// write is one patch a round decided on (decide), with its result.
type write struct {
	gvr schema.GroupVersionResource
	gvk schema.GroupVersionKind
	obj metav1.Object
	// assigned is the new kcp.io/assigned-locations (sorted; empty removes it), added the new
	// record (sorted; empty removes it).
	assigned, added []string
	// removes is whether a location leaves the assignment.
	removes bool
	// err is the patch's error, set by the round.
	err error
}

// compareWrites orders writes by resource and name (the order of the log).
func compareWrites(a, b *write) int {
	if c := strings.Compare(a.gvr.GroupResource().String(), b.gvr.GroupResource().String()); c != 0 {
		return c
	}
	return strings.Compare(a.obj.GetName(), b.obj.GetName())
}

// annotations returns what w applies: the assignment and the record, each only when not
// empty (left out, an annotation this field manager owned alone is removed).
func (w *write) annotations() map[string]string {
	out := map[string]string{}
	value := func(locs []string) string {
		b, _ := json.Marshal(locs) // strings: cannot fail
		return string(b)
	}
	if len(w.assigned) > 0 {
		out[contract.AssignedLocationsAnnotation] = value(w.assigned)
	}
	if len(w.added) > 0 {
		out[LocationsAnnotation] = value(w.added)
	}
	return out
}

// apply writes w with server-side apply as FieldManager (managedfields.ApplyAnnotations), with
// force: the assignment's value is the union of what others gave the object and what this
// controller adds, so it takes the field over from the manager that wrote it by hand (who
// keeps every location it wrote, as base). The object's resourceVersion is a precondition,
// so that an object someone changed since the informer's copy fails with 409 Conflict and is
// decided again from the newer copy instead of losing that change. Once this field manager
// owns the assignment alone, leaving it out removes it: that is how an object that only
// dependencies assigned becomes unassigned. A write that succeeded is remembered until the
// informer delivers it (pending).
func (c *Controller) apply(ctx context.Context, w *write) error {
	after, err := managedfields.ApplyAnnotations(ctx, c.metadata, w.gvr, w.gvk, w.obj, w.annotations(),
		managedfields.Apply{Manager: FieldManager, Force: true, Precondition: true})
	kind := "Assign"
	if w.removes {
		kind = "Unassign"
	}
	objectWrites.WithLabelValues(kind, worker.Result(err)).Inc()
	if err == nil {
		c.pending.Wrote(w.obj, after)
	}
	return err
}
