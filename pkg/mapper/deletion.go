package mapper

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// The mapper's side of the deletion protocol (docs/mapper.md, "Deletion"; docs/views.md,
// "Deletion"):
//
//  1. Before it first creates a copy of an object, the mapper adds its location's finalizer,
//     locations.mapper.kcp.io/<location>, to the source object through its view
//     (ensureFinalizer). An object whose copy exists already (made before the protocol, or
//     with it turned off) gets the finalizer at its next sync.
//  2. When the view shows the object with a deletionTimestamp (it left the location, or it is
//     deleted at the source and only locations' finalizers are left), the mapper deletes its
//     copy with the copy's UID as precondition, waits until the copy is gone from the target
//     (the target's own finalizers run), and then removes its finalizer through the view
//     (release). With kcp.io/deletion-policy: Orphan on the object it removes its marks from
//     the copy instead and leaves it.
//
// Each step is guarded by a precondition named where it is taken; a step that fails is retried
// from the view's current state, so a mapper killed between two steps converges when it runs
// again. The finalizer is written only when the view object lacks it (add) or holds it (remove),
// with the view object's resourceVersion as precondition: a stale view conflicts (409) and is
// retried once the informer caught up, so the source sees one add and one remove per object
// and location.

// holdsFinalizer reports whether the view object obj carries this location's finalizer.
func (m *Mapper) holdsFinalizer(obj *unstructured.Unstructured) bool {
	return slices.Contains(obj.GetFinalizers(), contract.LocationFinalizer(m.cfg.Location))
}

// releasing reports whether the view shows obj deleting for this location: a deletionTimestamp
// on an object holding the location's finalizer (the view shows one only then).
func (m *Mapper) releasing(obj *unstructured.Unstructured) bool {
	return obj.GetDeletionTimestamp() != nil && m.holdsFinalizer(obj)
}

// errDeletingAtSource says that the source refused the location's finalizer because it is
// deleting the object: no copy is made (it would outlive its source), and the object leaves
// the view once the source's other finalizers are gone.
var errDeletingAtSource = fmt.Errorf("the source object is being deleted: no copy is made")

// ensureFinalizer adds this location's finalizer to the source object of view object obj
// through the view, unless obj has it or the protocol is turned off. It returns
// errDeletingAtSource when the source refuses it because it is deleting the object, and any
// other error of the write (a 409 on a stale view object: retried once the informer has the
// current one).
func (m *Mapper) ensureFinalizer(ctx context.Context, r *resource, key itemKey, obj *unstructured.Unstructured) error {
	if m.cfg.NoFinalizers || m.holdsFinalizer(obj) {
		return nil
	}
	err := m.writeFinalizer(ctx, r, key, obj, true)
	if apierrors.IsInvalid(err) {
		return errDeletingAtSource
	}
	if err == nil {
		crashAt(CrashAfterFinalizerAdded)
	}
	return err
}

// writeFinalizer adds (add) or removes this location's finalizer on the source object of view
// object obj: an update of obj itself through the view path of its logical cluster, with obj's
// resourceVersion as precondition (updateThroughView; marksStorage in mapper-apiserver accepts
// exactly this change). Removing it removes the location's outcome record too: the object
// then leaves the view, and the location keeps no record on it.
func (m *Mapper) writeFinalizer(ctx context.Context, r *resource, key itemKey, obj *unstructured.Unstructured, add bool) error {
	own := contract.LocationFinalizer(m.cfg.Location)
	u := obj.DeepCopy()
	fins := slices.DeleteFunc(u.GetFinalizers(), func(f string) bool { return f == own })
	if add {
		fins = append(fins, own)
	}
	if len(fins) == 0 {
		fins = nil
	}
	u.SetFinalizers(fins)
	if !add {
		dropOwnOutcome(u, m.cfg.Location)
	}
	err := m.updateThroughView(ctx, r, key, u)
	op, doing := "remove", "removing"
	if add {
		op, doing = "add", "adding"
	}
	if err != nil {
		m.metrics.finalizerWrites(r.name(), op, "error").Inc()
		return fmt.Errorf("%s the finalizer %s on %s %s through the view: %w", doing, own, r.name(), key.source().String(), err)
	}
	m.metrics.finalizerWrites(r.name(), op, "success").Inc()
	return nil
}

// release finishes this location's part of the deletion of view object obj, shown deleting
// (releasing), whose copy would be at place: deletes the copy (or with
// kcp.io/deletion-policy: Orphan unmarks it), and once no copy of it is on the target removes
// the location's finalizer. It returns errWaitingForTarget while the copy is still there (its
// own finalizers run): the target informer's deletion event, or the backoff, brings it back.
func (m *Mapper) release(ctx context.Context, r *resource, key itemKey, obj *unstructured.Unstructured, place targetPlace) error {
	logger := klog.FromContext(ctx)
	ns, name := place.Namespace, place.Name
	live, err := m.targetMetadata.Resource(r.targetGVR()).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		m.metrics.errors(r.name(), "delete").Inc()
		return fmt.Errorf("reading the target copy: %w", err)
	}
	if live != nil {
		ref, srcUID, marked := MarkedSource(live, m.cfg.Location, r.namespaced)
		// Precondition of every destructive step below: the target object is this location's
		// copy of this very source object (its marks name it, and its source UID, when
		// recorded, is obj's: a copy of an earlier object of the same name is not obj's).
		ours := marked && ref == key.source() && (srcUID == "" || srcUID == obj.GetUID())
		switch {
		case !ours:
			logger.V(2).Info("The target object of that name is not this object's copy; leaving it", "resource", r.name(), "source", key.source().String())
		case obj.GetAnnotations()[contract.DeletionPolicyAnnotation] == contract.DeletionPolicyOrphan:
			if err := m.unmark(ctx, r, ns, name, live.UID); err != nil {
				m.metrics.errors(r.name(), "orphan").Inc()
				return err
			}
			m.metrics.deletes(r.name(), "orphaned").Inc()
			logger.V(2).Info("Orphaned the target copy of a deleted object (deletion policy Orphan)", "resource", r.name(), "source", key.source().String())
		default:
			if live.DeletionTimestamp == nil {
				if err := m.deleteTarget(ctx, r, ns, name, live.UID); err != nil {
					m.metrics.errors(r.name(), "delete").Inc()
					return err
				}
				m.metrics.deletes(r.name(), "finalizer").Inc()
				logger.V(2).Info("Deleted the target copy of an object the view shows deleting", "resource", r.name(), "source", key.source().String())
			}
			// Gone at once, or still held by its own finalizers: read it again.
			if gone, err := m.copyGone(ctx, r, ns, name, live.UID); err != nil || !gone {
				if err != nil {
					return err
				}
				m.states.set(key, outcomeNone)
				return errWaitingForTarget
			}
		}
	}
	// Precondition: no copy of obj is on the target (none, deleted, orphaned, or the object
	// there is not ours). The finalizer goes; the object then leaves the view.
	crashAt(CrashAfterCopyDeleted)
	if err := m.writeFinalizer(ctx, r, key, obj, false); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // gone from the view meanwhile: released by someone else
		}
		logger.V(2).Info("Removing the location's finalizer failed; retrying with backoff", "resource", r.name(), "source", key.source().String(), "err", err.Error())
		return err
	}
	m.states.set(key, outcomeNone)
	logger.V(2).Info("Released the location's finalizer", "resource", r.name(), "source", key.source().String())
	return nil
}

// errWaitingForTarget says that a deleted copy is still on the target (its own finalizers run).
var errWaitingForTarget = fmt.Errorf("waiting for the target copy to be gone")

// copyGone reports whether the target object ns/name with UID uid is gone (NotFound, or another
// object of that name).
func (m *Mapper) copyGone(ctx context.Context, r *resource, ns, name string, uid types.UID) (bool, error) {
	live, err := m.targetMetadata.Resource(r.targetGVR()).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the target copy: %w", err)
	}
	return live.UID != uid, nil
}

// unmark removes the mapper's marks (the location label and the source annotations) from the
// target object ns/name, with its UID as precondition (a merge patch naming metadata.uid fails
// with 409 on another object): the copy stays, and the mapper no longer manages it.
func (m *Mapper) unmark(ctx context.Context, r *resource, ns, name string, uid types.UID) error {
	annotations := map[string]interface{}{}
	for _, k := range []string{contract.SourceClusterAnnotation, contract.SourceNamespaceAnnotation, contract.SourceNameAnnotation,
		contract.SourceUIDAnnotation, contract.SourceGenerationAnnotation} {
		annotations[k] = nil
	}
	patch, err := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{
		"uid":         string(uid),
		"labels":      map[string]interface{}{contract.LocationLabel: nil},
		"annotations": annotations,
	}})
	if err != nil {
		return err
	}
	_, err = m.target.Resource(r.targetGVR()).Namespace(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: m.cfg.FieldManager})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the mapper's marks from %s %s/%s: %w", r.name(), ns, name, err)
	}
	return nil
}
