package placement

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/worker"
)

// maxConflicts is how many conflicts a status lists (the CRD's maxItems).
const maxConflicts = 100

// status returns e's new status from what the round found; old conditions keep their
// lastTransitionTime when their status does not change.
func (e *entry) status() controlv1alpha1.PlacementStatus {
	// The dependency controller's fields are carried over: it writes them itself.
	st := controlv1alpha1.PlacementStatus{ObservedGeneration: e.pl.Generation, Conditions: slices.Clone(e.pl.Status.Conditions),
		MissingDependencies: e.pl.Status.MissingDependencies, UnmirroredDependencies: e.pl.Status.UnmirroredDependencies}
	cond := metav1.Condition{Type: controlv1alpha1.PlacementReady, Status: metav1.ConditionTrue, Reason: controlv1alpha1.ReasonPlaced, ObservedGeneration: e.pl.Generation}
	unmirrored := sets.List(e.unmirrored.Clone().Insert(st.UnmirroredDependencies...))
	switch {
	case e.err != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, controlv1alpha1.ReasonInvalidSpec, e.err.Error()
		meta.SetStatusCondition(&st.Conditions, cond)
		return st
	case len(e.notServed) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, controlv1alpha1.ReasonResourceNotServed
		cond.Message = contract.Truncate(strings.Join(e.notServed, "; ")+"; the other resources are placed", 1024)
	case e.stuck.Len() > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, controlv1alpha1.ReasonNotReadyLocations
		cond.Message = fmt.Sprintf("%s not Ready for longer than %s; their objects stay because no other matching location may take them", strings.Join(sets.List(e.stuck), ", "), e.policy.Tolerance)
	case e.lost > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, controlv1alpha1.ReasonConflicts
		cond.Message = fmt.Sprintf("%d selected objects are not placed by this Placement; see status.conflicts", e.lost)
	case len(e.pool.Matching()) == 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, controlv1alpha1.ReasonNoLocations, "no SyncTarget matches locationSelector and locationNames"
		if len(e.unbound) > 0 {
			cond.Message = "no SyncTarget bound to this namespace matches locationSelector and locationNames" + unboundNote(e.unbound)
		}
	case e.placed == 0 && len(e.pool.Held()) == len(e.pool.Matching()):
		cond.Status, cond.Reason = metav1.ConditionFalse, controlv1alpha1.ReasonNoLocations
		cond.Message = fmt.Sprintf("every matching location (%s) has been not Ready for longer than %s", strings.Join(e.pool.Matching(), ", "), e.policy.Tolerance)
	case e.placed == 0 && len(e.members) > 0 && len(e.skipped) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, controlv1alpha1.ReasonNoLocations
		cond.Message = contract.Truncate("no matching location serves the selected objects' resources compatibly"+e.skippedNote(), 1024)
	case len(unmirrored) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, controlv1alpha1.ReasonNotMirrored
		cond.Message = contract.Truncate(fmt.Sprintf("the location views do not serve %s (mapper-apiserver's --resources): those objects are assigned but never reach a location",
			strings.Join(unmirrored, ", ")), 1024)
	default:
		cond.Message = fmt.Sprintf("%d objects in %d groups placed on %d locations", e.placed, e.groups.Len(), e.locations.Len())
		if st.MissingDependencies > 0 {
			cond.Message += fmt.Sprintf("; %d references to objects that do not exist (see the Events of the referencing objects)", st.MissingDependencies)
		}
		cond.Message = contract.Truncate(cond.Message+unboundNote(e.unbound)+e.skippedNote(), 1024)
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	st.Locations = sets.List(e.locations)
	st.PlacedObjects = e.placed
	st.PlacedGroups = int64(e.groups.Len())
	slices.SortFunc(e.conflicts, func(a, b controlv1alpha1.PlacementConflict) int {
		if c := strings.Compare(a.Resource, b.Resource); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	st.ConflictCount = int64(len(e.conflicts))
	st.Conflicts = e.conflicts[:min(len(e.conflicts), maxConflicts)]
	for _, l := range sets.List(sets.KeySet(e.pool.Evictions)) {
		st.Evictions = append(st.Evictions, controlv1alpha1.LocationEviction{Location: l, Time: metav1.NewTime(e.pool.Evictions[l])})
	}
	return st
}

// writeStatus adds the finalizer to a live Placement when missing, and writes its status
// when it changed; an Event records each location its objects moved off.
func (c *Controller) writeStatus(ctx context.Context, e *entry) error {
	u := e.u
	if !slices.Contains(u.GetFinalizers(), Finalizer) {
		u = u.DeepCopy()
		u.SetFinalizers(append(u.GetFinalizers(), Finalizer))
		out, err := c.dyn.Resource(Resource).Namespace(u.GetNamespace()).Update(ctx, u, metav1.UpdateOptions{FieldManager: FieldManager})
		statusWrites.WithLabelValues(worker.Result(err)).Inc()
		if err != nil {
			return fmt.Errorf("adding the finalizer to Placement %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		u = out
	}
	st := e.status()
	if equality.Semantic.DeepEqual(st, e.pl.Status) {
		return nil
	}
	for _, ev := range st.Evictions {
		if !slices.ContainsFunc(e.pl.Status.Evictions, func(old controlv1alpha1.LocationEviction) bool { return old.Location == ev.Location }) && c.recorder != nil {
			c.recorder.Eventf(u, nil, "Warning", "LocationEvicted", "Evict",
				"location %s has been not Ready for longer than %s: its objects move to other matching locations where there is room", ev.Location, e.policy.Tolerance)
		}
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return err
	}
	u = u.DeepCopy()
	u.Object["status"] = obj
	_, err = c.dyn.Resource(Resource).Namespace(u.GetNamespace()).UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: FieldManager})
	statusWrites.WithLabelValues(worker.Result(err)).Inc()
	if err != nil {
		return fmt.Errorf("writing the status of Placement %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// finish removes the finalizer of a Placement being deleted. Precondition (reconcile's): this
// round visited every object of the Placement's resources in its namespace and removed the
// annotations it owned from each without error (an error ends the round before finish). A
// Placement whose spec does not compile names no resources: its assignments stay (never
// removed on a spec that cannot be read) and its deletion completes.
func (c *Controller) finish(ctx context.Context, e *entry) error {
	if !slices.Contains(e.u.GetFinalizers(), Finalizer) {
		return nil
	}
	u := e.u.DeepCopy()
	u.SetFinalizers(slices.DeleteFunc(u.GetFinalizers(), func(f string) bool { return f == Finalizer }))
	_, err := c.dyn.Resource(Resource).Namespace(u.GetNamespace()).Update(ctx, u, metav1.UpdateOptions{FieldManager: FieldManager})
	statusWrites.WithLabelValues(worker.Result(err)).Inc()
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the finalizer of Placement %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	klog.FromContext(ctx).V(2).Info("Removed the assignments of a deleted Placement", "placement", u.GetNamespace()+"/"+u.GetName())
	return nil
}

// unboundNote is the part of a Ready message that names the selected locations not bound to
// the Placement's namespace (at most 10), "" when there are none.
func unboundNote(unbound []string) string {
	if len(unbound) == 0 {
		return ""
	}
	return fmt.Sprintf("; %d selected locations are not bound to this namespace by a LocationBinding and take none of its objects: %s", len(unbound), contract.JoinFirst(unbound, 10))
}
