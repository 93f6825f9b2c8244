package mapper

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// sync makes the target match the view for one object: apply its copy when the view has it,
// delete the copy when it does not. It is the sync queue's work function.
func (m *Mapper) sync(ctx context.Context, key itemKey) error {
	r := m.resource(key.GVR)
	if r == nil {
		return nil // not mapped any more
	}
	if !m.owns(key.source()) {
		// Another shard's object (its copy changed on the shared target): never touched here.
		// The view of this mapper's part does not hold it, so without this precondition a
		// deleteCopy would find it "gone from the view" and delete another shard's copy.
		return nil
	}
	obj := r.viewObject(key, m.cfg.ClusterName)
	// Precondition of every write and delete on the target below: the location is not
	// paused, the resource not halted by its SyncTarget, and the target serves it (held).
	// A held object is synced again when the hold is lifted (SetPause, setServed); until then
	// the source object says why (an outcome record), and nothing on the target changes.
	if reason, message, held := m.held(r); held {
		if obj != nil && reason != "" {
			m.recordOutcome(ctx, r, key, obj, reason, message)
		}
		if reason == contract.OutcomePaused || reason == contract.OutcomeResourceHalted {
			m.progress.processed(key) // held by the SyncTarget: not a sync in progress
		}
		return nil
	}
	place, err := m.placeFor(ctx, r, key)
	if err != nil {
		// No place: nothing is written, and nothing deleted (a copy cannot be found without
		// its place, and is never guessed). The object says why; a change of its mapping
		// restarts the resource and syncs it again.
		if obj != nil {
			m.recordOutcome(ctx, r, key, obj, contract.OutcomeNamingFailed, err.Error())
		}
		if prev := m.states.set(key, outcomeRefused); prev != outcomeRefused {
			klog.FromContext(ctx).Info("Not mapping an object: its ResourceMapping's naming cannot place it", "resource", r.name(), "source", key.source().String(), "err", err.Error())
		}
		m.progress.processed(key)
		return nil
	}
	// One sync per target place at a time: two sources of one place (two logical clusters'
	// ns/name under the same mapping, or two objects a ResourceMapping's naming names alike)
	// must not both find it free.
	unlock := m.places.lock(place)
	defer unlock()
	switch {
	case obj != nil && m.releasing(obj):
		err = m.release(ctx, r, key, obj, place)
	case obj != nil && Mapped(obj):
		err = m.apply(ctx, r, key, obj, place)
	case !r.viewSynced():
		// Absent from a view that has not finished its first list says nothing.
		return errRequeue
	default:
		err = m.deleteCopy(ctx, r, key, place)
	}
	if !errors.Is(err, errRequeue) {
		m.progress.processed(key)
	}
	if !errors.Is(err, errConflict) {
		m.places.done(place, key)
	}
	return err
}

// apply writes the target copy of view object obj at place (its target namespace, "" for
// cluster-scoped resources, and name) with server-side apply.
func (m *Mapper) apply(ctx context.Context, r *resource, key itemKey, obj *unstructured.Unstructured, place targetPlace) error {
	logger := klog.FromContext(ctx)
	src := SourceOf(obj, m.cfg.ClusterName)
	ns := place.Namespace

	// The live copy: from the target informer, or read fresh when the informer does not have
	// it (it sees only managed objects) or the previous attempt failed (it may be stale).
	live := r.targetObject(ns, place.Name)
	if live == nil || m.syncQueue.NumRequeues(key) > 0 {
		var err error
		live, err = m.target.Resource(r.targetGVR()).Namespace(ns).Get(ctx, place.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			live = nil
		} else if err != nil {
			m.metrics.errors(r.name(), "apply").Inc()
			return m.applyFailed(ctx, r, key, obj, fmt.Errorf("reading the target copy: %w", err))
		}
	}
	// Precondition of the apply below: the place holds no object, or this object's own copy.
	// A copy of another source object keeps its place (never overwritten); with none there,
	// a ResourceMapping's naming gives the place to the lowest key wanting it (places.winner).
	if live != nil {
		if ref, _, ok := MarkedSource(live, m.cfg.Location, r.namespaced); !ok {
			return m.reportConflict(ctx, r, key, obj, place, "an object of that name exists on the target without the mapper's label and source annotations")
		} else if ref != src {
			return m.reportConflict(ctx, r, key, obj, place, "the target object "+placeString(place)+" is the copy of "+ref.String())
		}
	} else if r.projection.Naming != nil {
		if !r.viewSynced() {
			// The claims are complete once the view's first list is in: before, a higher key
			// could take a place a lower one, not listed yet, wants.
			return errRequeue
		}
		if w, ok := m.places.winner(place); ok && w != key {
			return m.reportConflict(ctx, r, key, obj, place, "the ResourceMapping's naming gives "+w.source().String()+" the same target place "+placeString(place)+", and the lower key takes it")
		}
	}
	// Before anything is written (the namespace included): the object is the source it claims
	// to be.
	if err := m.confirmIdentity(ctx, r, key, obj, live); err != nil {
		return err
	}
	if r.namespaced {
		if err := m.namespaces.ensure(ctx, ns, src, m.namespaceMapping(), r.projection.Naming.namesNamespace()); err != nil {
			var nc *namespaceConflict
			if errors.As(err, &nc) {
				return m.reportConflict(ctx, r, key, obj, place, nc.Error())
			}
			m.metrics.errors(r.name(), "namespace").Inc()
			m.noteRefusal(ctx, r, key, obj, "creating the target namespace "+ns, err)
			return m.applyFailed(ctx, r, key, obj, fmt.Errorf("creating the target namespace %s: %w", ns, err))
		}
	}

	// The location's finalizer is on the source object before a copy exists (deletion.go).
	if err := m.ensureFinalizer(ctx, r, key, obj); err != nil {
		if errors.Is(err, errDeletingAtSource) {
			logger.V(2).Info("Not copying an object the source is deleting", "resource", r.name(), "source", src.String())
			m.states.set(key, outcomeNone)
			return nil
		}
		m.metrics.errors(r.name(), "finalizer").Inc()
		return m.applyFailed(ctx, r, key, obj, fmt.Errorf("adding the location's finalizer through the view: %w", err))
	}
	desired := Transform(obj, TargetObject{Location: m.cfg.Location, Namespace: ns, Name: place.Name, Source: src, Kind: r.projection.TargetKind()})
	if live != nil {
		foreign, err := ForeignFields(live, m.cfg.FieldManager)
		if err != nil {
			logger.Error(err, "Reading field ownership of the target copy; applying every field", "resource", r.name(), "source", src.String())
		} else if dropped := DropFields(desired, foreign); len(dropped) > 0 {
			logger.V(4).Info("Leaving fields other managers own on the target", "resource", r.name(), "source", src.String(), "fields", dropped)
		}
	}
	config, hashed := configHash(desired)
	if hashed && m.states.applied.unchangedSince(key, config, live) {
		// The copy is as the last apply left it, and this one would send the same: a no-op
		// (appliedCopies), not sent.
		m.metrics.applies(r.name(), "unchanged").Inc()
	} else if err := m.applyCopy(ctx, r, key, obj, place, desired, config, hashed); err != nil {
		return err
	}
	if prev := m.states.set(key, outcomeMapped); prev != outcomeMapped {
		logger.V(4).Info("Mapped", "resource", r.name(), "source", src.String(), "targetNamespace", ns, "targetName", place.Name)
	}
	m.clearOutcome(ctx, r, key, obj)
	return nil
}

// applyCopy sends desired, the apply configuration of view object obj (config its configHash,
// when hashed), to place with server-side apply, and records what it sent
// (appliedCopies). It returns the sync's error when the target refuses or fails it
// (applyFailed).
func (m *Mapper) applyCopy(ctx context.Context, r *resource, key itemKey, obj *unstructured.Unstructured, place targetPlace, desired *unstructured.Unstructured, config uint64, hashed bool) error {
	applied, err := m.target.Resource(r.targetGVR()).Namespace(place.Namespace).Apply(ctx, place.Name, desired, metav1.ApplyOptions{FieldManager: m.cfg.FieldManager})
	if err != nil {
		m.metrics.applies(r.name(), "error").Inc()
		m.metrics.errors(r.name(), "apply").Inc()
		m.namespaces.forget(place.Namespace)
		m.noteRefusal(ctx, r, key, obj, "", err)
		if apierrors.IsNotFound(err) {
			// The namespace, or the resource itself, is gone from the target (a CRD deleted):
			// re-check discovery now rather than at the next refresh.
			served := TargetServes(m.targetDiscovery, []schema.GroupVersionResource{r.targetGVR()})
			if s, known := served[r.targetGVR()]; known && !s {
				m.setServed(ctx, r, false)
			}
		}
		return m.applyFailed(ctx, r, key, obj, err)
	}
	m.metrics.applies(r.name(), "success").Inc()
	if hashed {
		m.states.applied.record(key, config, applied.GetResourceVersion())
	}
	return nil
}

// maxLoggedError is how many bytes of a failed apply's error the mapper logs (a target's
// answer can quote the whole object).
const maxLoggedError = 1024

// applyFailed records that the apply of key's view object obj failed with err and returns
// the error the sync queue retries with backoff. The first failure of each version of the
// view object is logged at the default verbosity (the object, its view resourceVersion and
// the error, truncated to maxLoggedError bytes), the retries of that version at verbosity 2:
// an apply the target keeps rejecting shows once in the log, and again when the object
// changes, without a line per retry.
func (m *Mapper) applyFailed(ctx context.Context, r *resource, key itemKey, obj *unstructured.Unstructured, err error) error {
	src := SourceOf(obj, m.cfg.ClusterName)
	rv := obj.GetResourceVersion()
	msg := contract.Truncate(err.Error(), maxLoggedError)
	if m.states.failed(key, rv) {
		klog.FromContext(ctx).Info("Cannot apply an object onto the target; retrying with backoff (logged once per version of the view object)",
			"resource", r.name(), "source", src.String(), "resourceVersion", rv, "err", msg)
	} else {
		klog.FromContext(ctx).V(2).Info("Applying onto the target failed again; retrying with backoff", "resource", r.name(), "source", src.String(), "resourceVersion", rv, "err", msg)
	}
	return fmt.Errorf("applying %s %s: %w", r.name(), src.String(), err)
}

// deleteCopy deletes the target copy, at place, of an object that is not (or no longer) in
// the view.
// It deletes only an object that carries the mapper's label and names this very source, and
// only after a fresh read through the view (a consistent GET, answered from the source)
// confirms that the object is gone from the view: a view that is stale, restarting or
// unreachable never causes a deletion.
func (m *Mapper) deleteCopy(ctx context.Context, r *resource, key itemKey, place targetPlace) error {
	ns := place.Namespace
	live, err := m.targetMetadata.Resource(r.targetGVR()).Namespace(ns).Get(ctx, place.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		m.states.set(key, outcomeNone)
		return nil
	}
	if err != nil {
		m.metrics.errors(r.name(), "delete").Inc()
		return fmt.Errorf("reading the target copy: %w", err)
	}
	// Precondition of the deletion below: the object at the place is this location's copy of
	// this very source (another source's copy at a shared place, or an unmanaged object, is
	// never deleted), and the view confirms the source is gone.
	if ref, _, ok := MarkedSource(live, m.cfg.Location, r.namespaced); !ok || ref != key.source() {
		m.states.set(key, outcomeNone) // not ours: never deleted
		return nil
	}
	gone, err := m.goneFromView(ctx, r, key)
	if err != nil {
		m.metrics.errors(r.name(), "delete").Inc()
		return err
	}
	if !gone {
		klog.FromContext(ctx).V(2).Info("The view still has an object its informer lacks; waiting for the informer", "resource", r.name(), "source", key.source().String())
		return errRequeue // the informer has not caught up; it will deliver the object
	}
	if err := m.deleteTarget(ctx, r, ns, place.Name, live.UID); err != nil {
		m.metrics.errors(r.name(), "delete").Inc()
		return err
	}
	m.metrics.deletes(r.name(), "event").Inc()
	m.states.set(key, outcomeNone)
	klog.FromContext(ctx).V(2).Info("Deleted the target copy of an object that left the view", "resource", r.name(), "source", key.source().String(), "targetNamespace", ns)
	return nil
}

// goneFromView reports whether the object of key is not in the view (GoneFromView, through the
// view's path of its logical cluster). Any error is returned: then nothing may be deleted.
func (m *Mapper) goneFromView(ctx context.Context, r *resource, key itemKey) (bool, error) {
	view, err := m.clusterViews.For(key.Cluster)
	if err != nil {
		return false, fmt.Errorf("confirming through the view that %s %s is gone: %w", r.name(), key.source().String(), err)
	}
	return GoneFromView(ctx, view, r.gvr, key.source(), m.cfg.ClusterName)
}

// deleteTarget deletes target object ns/name with a UID precondition, so that an object
// re-created meanwhile is not hit. NotFound counts as deleted.
func (m *Mapper) deleteTarget(ctx context.Context, r *resource, ns, name string, uid types.UID) error {
	policy := metav1.DeletePropagationBackground
	err := m.target.Resource(r.targetGVR()).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid},
		PropagationPolicy: &policy,
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the target copy %s %s/%s: %w", r.name(), ns, name, err)
	}
	return nil
}
