package mapper

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"
	"k8s.io/klog/v2"
)

// sweep deletes orphans (invariant 4): managed target objects whose source the view does not
// hold, or that are not where the namespace mapping and the ResourceMapping's naming put
// their source (placeFor: the mapping or the naming changed).
// It lists the managed objects of every resource the target serves (metadata only, label
// contract.LocationLabel=<location>) and
//   - skips everything unless every view informer has synced and the view holds at least one
//     object: a view that is not synced, or empty (a wrong location, a server that lost its
//     cache), must not wipe the target;
//   - never touches an object without the mapper's label and source annotations, nor one whose
//     source is outside the mapper's part (Mapper.owns: another shard's copy);
//   - confirms each candidate with a consistent GET through the view before deleting it, with
//     a UID precondition;
//   - deletes nothing while the location is paused, nor of a resource held (Mapper.held);
//   - never deletes a copy whose source the naming cannot place (no place, no guess).
func (m *Mapper) sweep(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if m.pause.current().Paused {
		logger.V(2).Info("Skipping the orphan sweep: the location is paused")
		m.metrics.sweeps("skipped").Inc()
		return
	}
	resources := m.resourceList()
	total := 0
	for _, r := range resources {
		if !r.viewSynced() {
			logger.V(2).Info("Skipping the orphan sweep: a view informer has not synced", "resource", r.name())
			m.metrics.sweeps("skipped").Inc()
			return
		}
		total += len(r.view.GetStore().ListKeys())
	}
	if total == 0 {
		logger.Info("Skipping the orphan sweep: the view holds no objects; refusing to delete on an empty view")
		m.metrics.sweeps("skipped").Inc()
		return
	}
	deleted, failed := 0, false
	for _, r := range resources {
		if _, _, held := m.held(r); held {
			continue // not served by the target, or halted by the SyncTarget
		}
		n, err := m.sweepResource(ctx, r)
		deleted += n
		if err != nil {
			failed = true
			m.metrics.errors(r.name(), "sweep").Inc()
			logger.Error(err, "Orphan sweep of a resource failed", "resource", r.name())
		}
	}
	if failed {
		m.metrics.sweeps("failed").Inc()
	} else {
		m.metrics.sweeps("completed").Inc()
	}
	logger.V(2).Info("Orphan sweep done", "deleted", deleted)
}

// sweepResource deletes the orphans of one resource and returns how many it deleted.
func (m *Mapper) sweepResource(ctx context.Context, r *resource) (int, error) {
	logger := klog.FromContext(ctx)
	client := m.targetMetadata.Resource(r.targetGVR())
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return client.List(ctx, opts)
	})
	deleted := 0
	err := p.EachListItemWithAlloc(ctx, listOptionsForLocation(m.cfg.Location), func(obj runtime.Object) error {
		item, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return nil
		}
		ref, _, ok := MarkedSource(item, m.cfg.Location, r.namespaced)
		if !ok {
			logger.V(2).Info("Leaving a labelled target object without source annotations alone", "resource", r.name(), "namespace", item.Namespace, "name", item.Name)
			return nil
		}
		if !m.owns(ref) {
			// Precondition of the sweep's deletion: the copy is of this mapper's part. Another
			// shard's copies share the target and the location label, but this mapper's view
			// (its part) never holds their sources: they would all look orphaned.
			return nil
		}
		key := keyOf(r.gvr, ref)
		want, err := m.placeFor(ctx, r, key)
		if err != nil {
			logger.V(2).Info("Not deleting a possible orphan: the naming cannot place its source", "resource", r.name(), "source", ref.String(), "err", err.Error())
			return nil
		}
		// Precondition of the deletion below: either the copy is at its source's place and the
		// view confirms the source is gone, or it is not at its source's place (the copy there,
		// if any, is made by the sync; this one is left from a former mapping or naming).
		if want.Namespace == item.Namespace && want.Name == item.Name {
			if obj := r.viewObject(key, m.cfg.ClusterName); obj != nil && Mapped(obj) {
				return nil
			}
			gone, err := m.goneFromView(ctx, r, key)
			if err != nil {
				logger.V(2).Info("Not deleting a possible orphan: the view could not confirm it is gone", "resource", r.name(), "source", ref.String(), "err", err.Error())
				return nil
			}
			if !gone {
				return nil
			}
		}
		if err := m.deleteTarget(ctx, r, item.Namespace, item.Name, item.UID); err != nil {
			m.metrics.errors(r.name(), "delete").Inc()
			logger.Error(err, "Deleting an orphan failed", "resource", r.name(), "source", ref.String())
			return nil
		}
		deleted++
		m.metrics.deletes(r.name(), "sweep").Inc()
		logger.Info("Deleted an orphan target object", "resource", r.name(), "namespace", item.Namespace, "name", item.Name, "source", ref.String())
		return nil
	})
	return deleted, err
}
