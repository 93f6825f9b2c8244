package placement

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/managedfields"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/worker"
	"github.com/cluster-mapper/cluster-mapper/pkg/placement"
)

// FieldManager is the field manager of the placement controller's server-side applies.
const FieldManager = "mapper-controller-placement"

// OwnerAnnotation names, on an object, the Placement (of the object's namespace) that wrote
// its assignment.
const OwnerAnnotation = "control.mapper.kcp.io/placement"

// desiredAnnotations returns the annotations the Placement named owner applies for d:
// the assignment, the owner, and with Divide the replicas patch per location and the
// Summarize status policy.
func desiredAnnotations(owner string, d placement.Decision, divide bool) map[string]string {
	locs, _ := json.Marshal(d.Locations)
	out := map[string]string{contract.AssignedLocationsAnnotation: string(locs), OwnerAnnotation: owner}
	if divide {
		out[contract.StatusPolicyAnnotation] = contract.StatusPolicySummarize
		for _, l := range d.Locations {
			out[contract.SpecDiffAnnotationPrefix+l] = fmt.Sprintf(`[{"op":"add","path":"/spec/replicas","value":%d}]`, d.Replicas[l])
		}
	}
	return out
}

// upToDate reports whether obj carries exactly want as the annotations the field manager owns.
func upToDate(obj metav1.Object, want map[string]string) bool {
	ann := obj.GetAnnotations()
	for k, v := range want {
		if got, ok := ann[k]; !ok || got != v {
			return false
		}
	}
	return managedfields.OwnedAnnotations(obj, FieldManager).Equal(sets.KeySet(want))
}

// apply writes w's annotations with server-side apply as FieldManager, without force
// (managedfields.ApplyAnnotations): the annotations FieldManager owned and w leaves out are
// removed, and a field another manager owns with another value makes it fail with 409
// Conflict, which leaves the object unchanged. A write that succeeded is remembered until the
// informer delivers it (pending).
func (c *Controller) apply(ctx context.Context, w *write) error {
	after, err := managedfields.ApplyAnnotations(ctx, c.metadata, w.gvr, w.gvk, w.obj, w.annotations, managedfields.Apply{Manager: FieldManager})
	kindLabel := "Assign"
	if len(w.annotations) == 0 {
		kindLabel = "Unassign"
	}
	objectWrites.WithLabelValues(kindLabel, worker.Result(err)).Inc()
	if err == nil {
		c.pending.Wrote(w.obj, after)
	}
	return err
}

// write is one server-side apply that a reconcile decided on (placeObject), with its result.
type write struct {
	gvr schema.GroupVersionResource
	gvk schema.GroupVersionKind
	obj metav1.Object
	// annotations are the ones to apply; nil removes those FieldManager owns (then owner
	// names the Placement whose assignment goes).
	annotations map[string]string
	owner       string
	// placer is the Placement that places the object (nil for a removal), group the key of
	// the object's group and decision the choice.
	placer   *entry
	group    string
	decision placement.Decision
	// err is the apply's error, set by applyAll.
	err error
}

// applyAll runs writes concurrently, at most c.limit of the whole controller at once
// (--concurrent-placement-writes), and sets each one's err. Placing a namespace's objects is
// one apply each, so writing them one by one would bound a Placement of many objects by one
// round trip per object. It returns when every write has finished; once ctx ends, the writes
// not yet started get its error.
func (c *Controller) applyAll(ctx context.Context, writes []*write) {
	c.limit.Each(ctx, len(writes),
		func(i int) { writes[i].err = c.applyWrite(ctx, writes[i]) },
		func(i int, err error) { writes[i].err = err })
}

// record folds the result of w into its Placement's round: a written object counts as placed,
// a 409 Conflict is reported as someone else's assignment, and a vanished object (404) is
// skipped. Any other error is returned; it ends the round before finish can remove a deleting
// Placement's finalizer.
func (w *write) record(ctx context.Context) error {
	gr := w.gvr.GroupResource()
	if w.placer == nil {
		// An apply that leaves every field out cannot conflict.
		if w.err != nil && !apierrors.IsNotFound(w.err) {
			return fmt.Errorf("removing %s's assignment of %s %s/%s: %w", w.owner, gr, w.obj.GetNamespace(), w.obj.GetName(), w.err)
		}
		return nil
	}
	p := w.placer
	switch {
	case w.err == nil:
		klog.FromContext(ctx).V(2).Info("Placed", "placement", p.name(), "resource", gr.String(), "object", w.obj.GetName(), "locations", w.decision.Locations, "replicas", w.decision.Replicas)
		p.placedOn(gr, w.group, w.decision.Locations)
	case apierrors.IsConflict(w.err):
		klog.FromContext(ctx).V(2).Info("Not placing: someone else owns its placement annotations", "placement", p.name(), "resource", gr.String(), "object", w.obj.GetName(), "err", w.err)
		p.conflict(gr, w.obj.GetName(), controlv1alpha1.ConflictAssignedByOther, "someone else changed its placement annotations: "+contract.Truncate(w.err.Error(), 512))
	case apierrors.IsNotFound(w.err):
	default:
		return fmt.Errorf("placing %s %s/%s for Placement %s: %w", gr, w.obj.GetNamespace(), w.obj.GetName(), p.pl.Name, w.err)
	}
	return nil
}
