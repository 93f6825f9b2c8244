package mapper

import (
	"context"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// Pause is what the location's SyncTarget asks of its mappers (docs/mapper.md, "Pausing"):
// Paused (spec.paused) stops every write and delete on the target; HaltedResources
// (spec.haltedResources, group-qualified resource names such as "configmaps" or
// "deployments.apps") stops them for those resources only. The mapper keeps reading its view,
// writing status back, renewing its Lease and reporting; each held object it would change
// carries an outcome record (contract.OutcomePaused, contract.OutcomeResourceHalted).
type Pause struct {
	Paused          bool
	HaltedResources []string
}

// holds reports whether p holds resource (a GroupResource string).
func (p Pause) holds(resource string) bool {
	return p.Paused || slices.Contains(p.HaltedResources, resource)
}

// pauseState is the Pause in force. Until the first SetPause it is unknown: with
// Config.AwaitPause the workers and the sweep wait for it (a mapper that starts while its
// location is paused writes nothing), without it the mapper starts unpaused.
type pauseState struct {
	mu    sync.RWMutex
	pause Pause
	known chan struct{}
	once  sync.Once
}

func newPauseState(await bool) *pauseState {
	s := &pauseState{known: make(chan struct{})}
	if !await {
		close(s.known)
	}
	return s
}

// current returns the Pause in force.
func (s *pauseState) current() Pause {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.pause
}

// wait blocks until the Pause is known (true) or ctx ends (false).
func (s *pauseState) wait(ctx context.Context) bool {
	select {
	case <-s.known:
		return true
	case <-ctx.Done():
		return false
	}
}

// SetPause puts p in force (the heartbeat calls it with the SyncTarget's spec on every
// renewal; nil-equivalent, the zero Pause, when the location has no SyncTarget). When it
// lifts a hold, every object of the resources it held is synced again. It is safe for
// concurrent use.
func (m *Mapper) SetPause(ctx context.Context, p Pause) {
	p.HaltedResources = slices.Clone(p.HaltedResources)
	slices.Sort(p.HaltedResources)
	m.pause.mu.Lock()
	prev := m.pause.pause
	m.pause.pause = p
	m.pause.mu.Unlock()
	first := false
	m.pause.once.Do(func() { first = true; close(m.pause.known) })

	m.metrics.paused("").Set(boolGauge(p.Paused))
	for _, res := range sets.List(sets.New(prev.HaltedResources...).Union(sets.New(p.HaltedResources...))) {
		m.metrics.paused(res).Set(boolGauge(slices.Contains(p.HaltedResources, res)))
	}
	if prev.Paused == p.Paused && slices.Equal(prev.HaltedResources, p.HaltedResources) && !first {
		return
	}
	klog.FromContext(ctx).Info("The location's SyncTarget changed what the mapper may write on the target",
		"paused", p.Paused, "haltedResources", p.HaltedResources)
	for _, r := range m.resourceList() {
		if prev.holds(r.name()) && !p.holds(r.name()) {
			// Lifted: what was held is synced now (applied, deleted, its record removed).
			m.enqueueView(r)
		}
	}
}

// boolGauge is 1 for true, 0 for false.
func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// enqueueView queues the sync of every object of r's view.
func (m *Mapper) enqueueView(r *resource) {
	for _, obj := range r.view.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			m.syncQueue.Add(keyOf(r.gvr, SourceOf(u, m.cfg.ClusterName)))
		}
	}
}

// held reports whether nothing may be written or deleted on the target for r's objects, and
// why, as an outcome record's reason and message: the SyncTarget pauses the location or halts
// r, or the target does not serve r (known from its discovery; reason "" while that is not
// known yet: no record).
func (m *Mapper) held(r *resource) (reason, message string, held bool) {
	p := m.pause.current()
	switch {
	case p.Paused:
		return contract.OutcomePaused, "The location's SyncTarget has spec.paused: true: nothing is written to or deleted from the target until it is false.", true
	case slices.Contains(p.HaltedResources, r.name()):
		return contract.OutcomeResourceHalted, "The location's SyncTarget names " + r.name() + " in spec.haltedResources: nothing of it is written to or deleted from the target until it does not.", true
	case r.halted.Load():
		// Read again under r's lock: setServed may have found the resource served since the
		// flag was read (it holds the lock until the flag is cleared), and an object must not
		// be recorded ResourceNotServed by a target that serves it.
		halted, known := r.servedState()
		switch {
		case !known:
			return "", "", true
		case halted && r.projection.Blocked != "":
			return contract.OutcomeResourceNotServed, r.projection.Blocked + ".", true
		case halted:
			t := r.targetGVR()
			return contract.OutcomeResourceNotServed, "The target does not serve " + t.GroupVersion().String() + " " + t.GroupResource().String() + " (is its CRD missing?): its objects wait until it does.", true
		}
	}
	return "", "", false
}
