package mapper

import (
	"context"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
)

// progress follows the initial sync: the objects each view held when its informer synced,
// until each has been processed once (mapped, in conflict, or failed and retrying). It logs
// progress every Config.ProgressInterval and a summary when done, and then opens /readyz and
// the orphan sweep. Halted resources do not hold it up; resources that appear later are not
// part of it.
type progress struct {
	m *Mapper

	mu      sync.Mutex
	started time.Time
	pending map[schema.GroupVersionResource]sets.Set[itemKey]
	// early holds the keys processed before their resource was seeded.
	early  map[schema.GroupVersionResource]sets.Set[itemKey]
	totals map[schema.GroupVersionResource]int
	done   bool
	doneCh chan struct{}
}

func newProgress(m *Mapper) *progress {
	return &progress{m: m, started: time.Now(), pending: map[schema.GroupVersionResource]sets.Set[itemKey]{},
		early: map[schema.GroupVersionResource]sets.Set[itemKey]{}, totals: map[schema.GroupVersionResource]int{}, doneCh: make(chan struct{})}
}

// processed records that key has been processed once.
func (p *progress) processed(key itemKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	if s := p.pending[key.GVR]; s != nil {
		s.Delete(key)
		return
	}
	if p.early[key.GVR] == nil {
		p.early[key.GVR] = sets.New[itemKey]()
	}
	p.early[key.GVR].Insert(key)
}

// complete reports whether the initial sync is done.
func (p *progress) complete() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// waitComplete blocks until the initial sync is done (true) or ctx ends (false).
func (p *progress) waitComplete(ctx context.Context) bool {
	select {
	case <-p.doneCh:
		return true
	case <-ctx.Done():
		return false
	}
}

// run checks the initial sync every second and logs its progress every ProgressInterval,
// until it is done or ctx ends.
func (p *progress) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastLog := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if p.check() {
			p.logSummary(logger)
			return
		}
		if time.Since(lastLog) >= p.m.cfg.ProgressInterval {
			lastLog = time.Now()
			p.logProgress(logger)
		}
	}
}

// check seeds the pending set of every resource whose view informer has synced, and marks
// the initial sync done once the view's discovery has been read, every resource is seeded or
// halted, and nothing is pending.
func (p *progress) check() bool {
	resources := p.m.resourceList()
	if !p.m.discovered() {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return true
	}
	ready := true
	for _, r := range resources {
		halted, known := r.servedState()
		if known && halted {
			continue
		}
		if _, seeded := p.pending[r.gvr]; !seeded {
			if !known || !r.viewSynced() {
				ready = false
				continue
			}
			keys := sets.New[itemKey]()
			for _, obj := range r.view.GetStore().List() {
				if u, ok := obj.(*unstructured.Unstructured); ok {
					if key := keyOf(r.gvr, SourceOf(u, p.m.cfg.ClusterName)); !p.early[r.gvr].Has(key) {
						keys.Insert(key)
					}
				}
			}
			p.pending[r.gvr] = keys
			delete(p.early, r.gvr)
			p.totals[r.gvr] = len(r.view.GetStore().ListKeys())
		}
		if p.pending[r.gvr].Len() > 0 {
			ready = false
		}
	}
	if ready {
		p.done = true
		close(p.doneCh)
		p.m.metrics.initialSyncComplete().Set(1)
	}
	return ready
}

// logProgress logs objects processed / total per resource.
func (p *progress) logProgress(logger klog.Logger) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, gvr := range sortedGVRs(p.totals) {
		pending := p.pending[gvr]
		logger.Info("Initial sync progress", "resource", gvr.GroupResource().String(),
			"processed", p.totals[gvr]-pending.Len(), "total", p.totals[gvr], "elapsed", time.Since(p.started).Round(time.Millisecond))
		if n := pending.Len(); n > 0 && n <= 5 {
			keys := make([]string, 0, n)
			for k := range pending {
				keys = append(keys, k.source().String())
			}
			sort.Strings(keys)
			logger.V(2).Info("Initial sync: objects not processed yet", "resource", gvr.GroupResource().String(), "objects", keys)
		}
	}
	for _, r := range p.m.resourceList() {
		if halted, known := r.servedState(); known && halted {
			logger.Info("Initial sync progress: resource halted", "resource", r.name())
		}
	}
}

// logSummary logs the outcome of the initial sync per resource.
func (p *progress) logSummary(logger klog.Logger) {
	p.mu.Lock()
	totals := map[schema.GroupVersionResource]int{}
	for k, v := range p.totals {
		totals[k] = v
	}
	p.mu.Unlock()
	for _, gvr := range sortedGVRs(totals) {
		c := p.m.states.counts(gvr.GroupResource().String())
		logger.Info("Initial sync of a resource", "resource", gvr.GroupResource().String(), "objects", totals[gvr],
			"mapped", c[outcomeMapped], "conflicts", c[outcomeConflict], "failing", c[outcomeError], "refused", c[outcomeRefused])
	}
	halted := []string{}
	for _, r := range p.m.resourceList() {
		if h, known := r.servedState(); known && h {
			halted = append(halted, r.name())
		}
	}
	sort.Strings(halted)
	logger.Info("Initial sync complete", "duration", time.Since(p.started).Round(time.Millisecond), "resources", len(totals), "halted", halted)
}

func sortedGVRs(m map[schema.GroupVersionResource]int) []schema.GroupVersionResource {
	out := make([]schema.GroupVersionResource, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
