package mapper

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// resolveInterval is how often resolveMapping looks at the informers until it can decide.
const resolveInterval = time.Second

// setMapping puts mapping in force and opens the workers and the sweep. It is called once.
func (m *Mapper) setMapping(mapping NamespaceMapping) {
	m.mapping.Store(mapping)
	m.metrics.namespaceMapping(mapping).Set(1)
	close(m.mappingResolved)
}

// namespaceMapping returns the mapping in force; only valid once mappingResolved is closed
// (the workers and the sweep wait for it).
func (m *Mapper) namespaceMapping() NamespaceMapping {
	mapping, _ := m.mapping.Load().(NamespaceMapping)
	return mapping
}

// waitMapping blocks until the mapping is in force (true) or ctx ends (false).
func (m *Mapper) waitMapping(ctx context.Context) bool {
	select {
	case <-m.mappingResolved:
		return true
	case <-ctx.Done():
		return false
	}
}

// resolveMapping resolves NamespaceMappingAuto once (ResolveNamespaceMapping): it waits until
// the view's discovery has been read and every resource's view informer, and target informer
// where the target serves the resource, has synced; then it reads the managed copies from the
// target informers' stores and the logical clusters from the view informers' stores, with no
// requests of its own. Nothing is applied, deleted or written back before: the workers and
// the sweep wait. It returns nil once decided or when ctx ends, and the error of copies
// placed by both mappings.
func (m *Mapper) resolveMapping(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	loggedEmpty := false
	err := wait.PollUntilContextCancel(ctx, resolveInterval, true, func(context.Context) (bool, error) {
		evidence, clusters, objects, ready := m.placementState()
		if !ready {
			return false, nil
		}
		mapping, why, decided, err := ResolveNamespaceMapping(evidence, clusters, objects)
		if err != nil {
			return false, err
		}
		if !decided {
			if !loggedEmpty {
				loggedEmpty = true
				logger.Info("Namespace mapping undecided (--namespace-mapping=auto): the target holds no copies and the view is empty; deciding when objects arrive")
			}
			return false, nil
		}
		logger.Info("Resolved --namespace-mapping=auto", "namespaceMapping", mapping, "reason", why)
		m.setMapping(mapping)
		return true, nil
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// placementState reads what ResolveNamespaceMapping needs from the informers: the evidence of
// the managed copies, the logical clusters and the number of the view's objects. ready is
// false while discovery, a view informer or a target informer has not synced yet.
func (m *Mapper) placementState() (evidence PlacementEvidence, clusters []string, objects int, ready bool) {
	if !m.discovered() {
		return evidence, nil, 0, false
	}
	seen := sets.New[string]()
	for _, r := range m.resourceList() {
		halted, known := r.servedState()
		if !known || !r.viewSynced() {
			return evidence, nil, 0, false
		}
		for _, k := range r.view.GetStore().ListKeys() {
			if cluster, _, _, ok := contract.Key(k).Split(); ok {
				seen.Insert(cluster)
			}
			objects++
		}
		if halted {
			continue
		}
		inf := r.targetInformer()
		if inf == nil || !inf.HasSynced() {
			return evidence, nil, 0, false
		}
		if !r.namespaced {
			continue
		}
		for _, obj := range inf.GetStore().List() {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			if ref, _, ok := MarkedSource(u, m.cfg.Location, true); ok {
				evidence.Observe(u.GetNamespace(), u.GetName(), ref)
			}
		}
	}
	return evidence, sets.List(seen), objects, true
}

// checkExplicitMapping logs a warning, once the informers have synced, when the target holds
// copies placed by the other mapping than the explicit one in force: the orphan sweep moves
// them (deletes each and re-creates it at its new place). An explicit mapping is used as
// given; this only makes a flip visible.
func (m *Mapper) checkExplicitMapping(ctx context.Context) {
	_ = wait.PollUntilContextCancel(ctx, resolveInterval, true, func(context.Context) (bool, error) {
		evidence, _, _, ready := m.placementState()
		if !ready {
			return false, nil
		}
		other, n, example := NamespaceMappingPrefixed, evidence.Prefixed, evidence.PrefixedExample
		if m.namespaceMapping() == NamespaceMappingPrefixed {
			other, n, example = NamespaceMappingSame, evidence.Same, evidence.SameExample
		}
		if n > 0 {
			klog.FromContext(ctx).Info("Warning: the target holds copies placed by another namespace mapping; the orphan sweep moves them to the places of the explicit mapping",
				"namespaceMapping", m.namespaceMapping(), "otherMapping", other, "copies", n, "example", example)
		}
		return true, nil
	})
}
