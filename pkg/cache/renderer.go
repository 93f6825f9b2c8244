package cache

import (
	"context"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/pkg/fairqueue"
)

// Defaults of RendererOptions.
const (
	// DefaultRenderWorkers is how many renderings run at once. A tenant (a namespace) has one
	// at most, so with two or more one tenant's slow rendering never holds another's.
	DefaultRenderWorkers = 4
	// DefaultRenderCostPerObject is the CEL cost one object version's renderings (every
	// location, every Customization) may spend: the runtime budget kube-apiserver gives one
	// MutatingAdmissionPolicy mutation for one request (celconfig.RuntimeCELCostBudget).
	DefaultRenderCostPerObject = 10_000_000
	// DefaultRenderCostPerSecond is the CEL cost per second a namespace's renderings may spend
	// on average (its burst is DefaultRenderCostPerObject). CEL's cost units measured here run
	// at 1 to 2.5 µs each for list-building expressions and far less for field access: 200,000
	// per second is at most about a fifth of a core per namespace, and about 460 renderings a
	// second of docs/customization.md's example (431 units each).
	DefaultRenderCostPerSecond = 200_000
)

// RendererOptions configure a Renderer. Zero values select the defaults.
type RendererOptions struct {
	// Workers is how many renderings run at once (DefaultRenderWorkers).
	Workers int
	// CostPerObject bounds the CEL cost of the renderings of one object version
	// (DefaultRenderCostPerObject): past it, the Customization that crossed it fails on the
	// object with reason BudgetExceeded (customization.ReasonBudgetExceeded).
	CostPerObject int64
	// CostPerSecond is each namespace's budget of CEL cost per second
	// (DefaultRenderCostPerSecond); a namespace that spent more waits, and its Customizations
	// report it (Throttled).
	CostPerSecond int64
	// Clock is the time source (tests use a fake clock); default the real clock.
	Clock clock.WithTicker
}

// Renderer makes the renderings that run CEL (a Customization selects the object for the
// location) away from ingest, fairly across tenants: the stores of a Cache hand it each object
// version with pending renderings (Object.pending), and its workers render them and apply the
// results to the stores as re-renderings (ResourceStore.renderPending). A tenant is a
// namespace of a logical cluster, the scope of a Customization. Keys are served round-robin
// over the tenants with work, a tenant has one key in flight at most, each object version's
// renderings are bounded by CostPerObject, and each tenant by CostPerSecond
// (pkg/fairqueue). docs/views.md, "Deferred renderings", has the rules.
type Renderer struct {
	opts  RendererOptions
	queue *fairqueue.Queue[renderKey]

	mu sync.Mutex
	// fresh reads the source's current resourceVersion of a resource (Source.ResourceVersion),
	// for a re-rendering that needs a new one (applyRenderings); nil: none.
	fresh func(ctx context.Context, gvr schema.GroupVersionResource) (uint64, error)
}

// renderKey is one object of one store whose pending renderings a worker makes.
type renderKey struct {
	store *ResourceStore
	key   contract.Key
}

// NewRenderer returns a Renderer; Run starts its workers. Until then renderings wait.
func NewRenderer(opts RendererOptions) *Renderer {
	if opts.Workers <= 0 {
		opts.Workers = DefaultRenderWorkers
	}
	if opts.CostPerObject <= 0 {
		opts.CostPerObject = DefaultRenderCostPerObject
	}
	if opts.CostPerSecond <= 0 {
		opts.CostPerSecond = DefaultRenderCostPerSecond
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Renderer{opts: opts, queue: fairqueue.New[renderKey](fairqueue.Options{
		CostPerSecond: opts.CostPerSecond, Burst: opts.CostPerObject, Clock: opts.Clock})}
}

// setSource makes re-renderings read fresh resourceVersions from src (Cache.New).
func (r *Renderer) setSource(fresh func(ctx context.Context, gvr schema.GroupVersionResource) (uint64, error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fresh = fresh
}

// freshResourceVersion returns the source's current resourceVersion of gvr, 0 when it cannot
// be read within rulesProbeTimeout.
func (r *Renderer) freshResourceVersion(ctx context.Context, gvr schema.GroupVersionResource) uint64 {
	r.mu.Lock()
	fresh := r.fresh
	r.mu.Unlock()
	if fresh == nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, rulesProbeTimeout)
	defer cancel()
	rv, err := fresh(ctx, gvr)
	if err != nil {
		klog.V(2).InfoS("Reading the source's resourceVersion for a re-rendering failed; re-rendering at the store's resourceVersion",
			"resource", gvr.GroupResource().String(), "err", contract.Truncate(err.Error(), maxLoggedValue))
		return 0
	}
	return rv
}

// Run runs the workers until ctx ends.
func (r *Renderer) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range r.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r.processNext(ctx) {
			}
		}()
	}
	<-ctx.Done()
	r.queue.ShutDown()
	wg.Wait()
}

// processNext renders one queued object; false when ctx ended or the queue was shut down.
func (r *Renderer) processNext(ctx context.Context) bool {
	tenant, k, ok := r.queue.Get(ctx)
	if !ok {
		return false
	}
	meter := customization.NewMeter(r.opts.CostPerObject)
	start := time.Now()
	k.store.renderPending(ctx, k.key, meter)
	renderDuration.Observe(time.Since(start).Seconds())
	renderCost.Add(float64(meter.Spent()))
	r.queue.Done(tenant, k, meter.Spent())
	renderQueued.Set(float64(r.queue.Len()))
	return true
}

// retryDelay is how long a rendering that found no new resourceVersion to be shown at waits
// before it is made again (applyRenderings).
const retryDelay = 500 * time.Millisecond

// retry queues key of s (an object of tenant) again after retryDelay: its pending renderings
// are made again then (applyRenderings found no resourceVersion to show them at). A queue shut
// down meanwhile takes nothing.
func (r *Renderer) retry(s *ResourceStore, tenant string, key contract.Key) {
	renderRetries.Inc()
	go func() {
		<-r.opts.Clock.After(retryDelay)
		r.queue.Add(tenant, renderKey{store: s, key: key})
		renderQueued.Set(float64(r.queue.Len()))
	}()
}

// add queues o, a version of a store's object with pending renderings.
func (r *Renderer) add(s *ResourceStore, o *Object) {
	r.queue.Add(tenantOf(o), renderKey{store: s, key: o.key})
	renderQueued.Set(float64(r.queue.Len()))
}

// Throttled reports whether the namespace namespace of the logical cluster cluster spent its
// CEL budget per second: its renderings wait until it refilled.
func (r *Renderer) Throttled(cluster, namespace string) bool {
	return r.queue.Throttled(tenant(cluster, namespace))
}

// tenantOf returns the tenant of an object: its namespace in its logical cluster.
func tenantOf(o *Object) string { return tenant(o.cluster, o.namespace) }

// tenant names the namespace of a logical cluster (a Customization's scope) in the queue.
func tenant(cluster, namespace string) string { return cluster + "|" + namespace }

// rendering is one location's rendering made by a worker: the view, or why it failed.
type rendering struct {
	u   *unstructured.Unstructured
	err error
}

// enqueuePending hands o to the store's Renderer when it has pending renderings. Called after
// o was published.
func (s *ResourceStore) enqueuePending(o *Object) {
	if s.opts.Renderer != nil && len(o.pendingLocations()) > 0 {
		s.opts.Renderer.add(s, o)
	}
}

// renderPending makes the pending renderings of the stored version of key, with the store's
// current rules and meter (its limit bounds their CEL cost), outside the store's locks, and
// applies them (applyRenderings). A rendering that spends the meter fails with
// customization.ReasonBudgetExceeded, like any failure: the view keeps the last rendering.
func (s *ResourceStore) renderPending(ctx context.Context, key contract.Key, meter *customization.Meter) {
	s.mu.RLock()
	from := s.objects[key]
	rules := s.rules.load()
	s.mu.RUnlock()
	if from == nil {
		return
	}
	pending := from.pendingLocations()
	if len(pending) == 0 {
		return
	}
	u := from.content()
	rctx := customization.WithMeter(ctx, meter)
	results := make(map[string]rendering, len(pending))
	for _, loc := range pending {
		v, err := renderFor(rctx, rules, s.gvr, from.cluster, u, from.assigned, loc, s.opts.MaxRenderingBytes)
		results[loc] = rendering{u: v, err: err}
	}
	s.applyRenderings(ctx, key, from, rules, results)
}

// applyRenderings applies results, the renderings of from (a version of key) made with rules,
// to the version of key stored now, as one re-rendering event (the mechanism of SetRules,
// docs/views.md "Customizations and resourceVersions"): the locations whose view changed get
// a MODIFIED (an ADDED when the object was withheld from them until now) at the store's
// resourceVersion, shared with the source's events at it and ordered after them. That
// resourceVersion is above the one each such view showed (the object's version is newer than
// its last visible change), except when a rules change re-rendered the newest version of an
// object unchanged at the store's resourceVersion: the re-rendering then takes the source's
// current resourceVersion (Source.ResourceVersion), as SetRules does, so that clients see a
// new one.
//
// Which results apply to the stored version (withRenderings): all of them when it is still
// from's version and the rules did not change for the location meanwhile; of a newer version,
// a rendering that succeeded is shown while the newer one's is pending when it is newer than
// what the view shows (so that an object written faster than it renders still moves), and a
// failure is dropped (the newer version's own rendering decides). Comparing the views is done
// outside the store's locks, and again when the stored version changed meanwhile; encoding
// the new views holds the writers' lock (not the readers').
func (s *ResourceStore) applyRenderings(ctx context.Context, key contract.Key, from *Object, rules Rules, results map[string]rendering) {
	var fresh uint64
	probed := false
	for {
		s.mu.RLock()
		cur, now, closed := s.objects[key], s.rules.load(), s.closed
		s.mu.RUnlock()
		if cur == nil || closed {
			return
		}
		n, changed, statusOnly, failed := cur.withRenderings(s.gvr, from, rules, now, results)
		if n == nil {
			return
		}
		s.writeMu.Lock()
		if s.objects[key] != cur || s.rules.load() != now {
			s.writeMu.Unlock()
			continue
		}
		// Holding writeMu, the writer may read s.rv and s.synced without mu.
		rv, shared := s.rv, true
		if showsAlready(cur, changed, rv) {
			// A view that shows rv already would not show the change as one (clients skip an
			// update at the resourceVersion they hold): take a fresh one.
			if !probed {
				s.writeMu.Unlock()
				fresh, probed = s.opts.Renderer.freshResourceVersion(ctx, s.gvr), true
				continue
			}
			if fresh <= s.rv || !s.synced {
				// No resourceVersion above the one the view shows: showing the change at it
				// would show one resourceVersion with two contents. The rendering stays
				// pending (the view keeps what it shows) and is made again later, when the
				// source or the store has moved on.
				s.writeMu.Unlock()
				s.opts.Renderer.retry(s, tenantOf(cur), key)
				return
			}
			rv, shared = fresh, false
		}
		n.visible = rerenderedVisibility(cur, n, rv, changed, statusOnly)
		n.compact(cur)
		s.mu.Lock()
		if !s.closed {
			// A fresh rv moves the store past its source stream: a source event older than it
			// that arrives later restarts the history (noteStreamLocked), as after SetRules.
			for loc := range changed {
				s.snaps.drop(loc)
			}
			s.applyLocked(&event{typ: watch.Modified, rv: rv, obj: n, prev: cur, rerendered: changed, sharedRV: shared}, len(changed) > 0)
			s.notifyLocked()
		}
		s.mu.Unlock()
		s.writeMu.Unlock()
		for _, loc := range failed {
			s.renderFailed(n, loc, results[loc].err)
		}
		s.enqueuePending(n)
		return
	}
}

// showsAlready reports whether a location of changed that o is shown to shows the
// resourceVersion rv already.
func showsAlready(o *Object, changed map[string]bool, rv uint64) bool {
	for loc := range changed {
		if o.HasLocation(loc) && o.VisibleResourceVersion(loc) >= rv {
			return true
		}
	}
	return false
}

// withRenderings returns a new version of o (the stored version) with results applied (see
// applyRenderings), the locations whose view it changes, those among them whose view changes
// in .status alone and keeps its generation (compareRendering), and those whose rendering it
// settles as failed; nil when no result applies. from is the version the results rendered,
// with rules used; now are the store's rules.
func (o *Object) withRenderings(gvr schema.GroupVersionResource, from *Object, used, now Rules, results map[string]rendering) (n *Object, changed, statusOnly map[string]bool, failed []string) {
	same := from == o || (from.uid == o.uid && from.rvString == o.rvString)
	apply := make(map[string]rendering, len(results))
	for loc, r := range results {
		switch {
		case !o.pending(loc):
			// Settled meanwhile (a rules change rendered it without CEL), or no longer assigned.
		case used != now && rulesDiffer(used, now, gvr, o, loc):
			// Made with rules that changed for the location: the pending rendering decides.
		case !same && (r.err != nil || !newerThanShown(o, loc, from)):
			// A failure of an older version, or a rendering older than what the view shows.
		default:
			apply[loc] = r
		}
	}
	if len(apply) == 0 {
		return nil, nil, nil, nil
	}
	u := o.content()
	n = o.rebuilt(u)
	for loc, r := range apply {
		if !same {
			n.lastGood[loc] = r.u // shown while this version's rendering is pending
			continue
		}
		delete(n.failed, loc)
		if r.err != nil {
			n.setFailed(loc, r.err, nil) // lastGood, if any, stays
			failed = append(failed, loc)
			continue
		}
		delete(n.lastGood, loc)
		n.setRendered(loc, r.u)
	}
	n.settleLocations()
	changed, statusOnly = map[string]bool{}, map[string]bool{}
	for loc := range apply {
		switch {
		case !n.HasLocation(loc):
			// Still withheld.
		case !o.HasLocation(loc):
			changed[loc] = true // withheld until now: ADDED
		default:
			compareRendering(changed, statusOnly, o, n, u, loc)
		}
	}
	return n, changed, statusOnly, failed
}

// rebuilt returns a new, unpublished Object of o's source version with content u (o.content())
// and copies of o's renderings, to be changed and settled (settleLocations) by the caller. It
// shares o's JSON.
func (o *Object) rebuilt(u *unstructured.Unstructured) *Object {
	n := newObject(o.key, o.cluster, o.namespace, o.name, o.assigned, o.rv, u)
	n.edit, n.sourceJSON = o.edit, o.sourceJSON
	if _, err := o.MarshalJSON(); err == nil && o.base == nil {
		n.jsonOnce.Do(func() { n.json = o.json })
	}
	n.rendered = cloneMap(o.rendered)
	n.lastGood = cloneMap(o.lastGood)
	n.failed = cloneMap(o.failed)
	return n
}

// cloneMap returns a copy of m, an empty map for nil.
func cloneMap[V any](m map[string]V) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// newerThanShown reports whether from, an older version of o, is newer than the rendering
// location's view of o shows (true when the view shows none: the object is withheld).
func newerThanShown(o *Object, location string, from *Object) bool {
	shown := o.lastGood[location]
	return shown == nil || renderedFrom(shown) < from.rv
}

// renderedFrom returns the source resourceVersion of the version a kept rendering (rendered,
// lastGood) was made from: its metadata.resourceVersion, which a rendering keeps as the source
// object had it (a Customization may not change it: ProtectedFieldChanged; views show the
// visible one, set on their copy by ForLocation).
func renderedFrom(u *unstructured.Unstructured) uint64 {
	rv, _ := strconv.ParseUint(u.GetResourceVersion(), 10, 64)
	return rv
}

// WaitRendered blocks until the view of location shows the object namespace/name of the
// logical cluster cluster rendered from its stored version (no rendering of it is pending for
// location), or no such object is stored. It returns ctx.Err() when ctx ends first. A
// consistent GET of an object waits for it (docs/views.md, "Deferred renderings"): a consistent
// read shows the object as its newest version renders, never the previous rendering.
func (s *ResourceStore) WaitRendered(ctx context.Context, location, cluster, namespace, name string) error {
	key := contract.NewKey(cluster, namespace, name)
	return s.waitUntil(ctx, func() bool {
		o := s.objects[key]
		return o == nil || !o.pending(location) || s.closed
	})
}
