package cache

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
)

// Rules are the Customizations, locations and LocationBindings the views render with
// (docs/customization.md, docs/tenancy.md): customization.Rules, whose snapshots the
// customization.Follower delivers.
type Rules = customization.Rules

// rulesHolder boxes a Rules value (which may be nil) for an atomic.Pointer.
type rulesHolder struct{ rules Rules }

// storeRules is the store's current Rules, read by ingest (under writeMu) and by the status
// write path (any goroutine).
type storeRules struct{ p atomic.Pointer[rulesHolder] }

func (r *storeRules) load() Rules {
	if h := r.p.Load(); h != nil {
		return h.rules
	}
	return nil
}

// Rules returns the rules the store renders with (nil: none set).
func (s *ResourceStore) Rules() Rules { return s.rules.load() }

// LocationView returns a copy of u, a source object of the store's resource assigned to
// locations, as location's view shows it under the store's current rules; when the rendering
// fails, the view without Customizations or patch (baseView). The status write path answers
// with it; reads are served by Object.ForLocation, which keeps the last rendering that
// succeeded instead. With a Renderer, the rendering may spend its budget per object version
// (RendererOptions.CostPerObject) at most: a status write does not run more of a tenant's CEL
// than ingest would.
func (s *ResourceStore) LocationView(u *unstructured.Unstructured, cluster string, locations []string, location string) *unstructured.Unstructured {
	ctx := context.Background()
	if r := s.opts.Renderer; r != nil {
		ctx = customization.WithMeter(ctx, customization.NewMeter(r.opts.CostPerObject))
	}
	if v, err := renderFor(ctx, s.rules.load(), s.gvr, cluster, u, locations, location, s.opts.MaxRenderingBytes); err == nil {
		return v
	}
	return baseView(u, locations, location)
}

// SetRules makes the store render with rules from now on and re-renders the stored objects
// whose rendering may differ (customization.Rules.Differs) for one of their locations (a
// change of a Customization or of a SyncTarget's labels), and builds again those of the
// namespaces whose bound locations changed (customization.Rules.Bindings, bound.go): a location
// that becomes bound gets an ADDED for each object assigned to it, one that is no longer bound a
// DELETED.
//
// resourceVersion semantics (docs/views.md, "Customizations and resourceVersions"): a
// re-rendering is not a change of the resource in the source, so it has no resourceVersion of
// its own. fresh is the source's current resourceVersion, read after the rules changed (a
// consistent LIST, Source.ResourceVersion); 0 when it could not be read.
//   - fresh above the store's resourceVersion: the re-rendering is an event at fresh, and the
//     store's resourceVersion moves to fresh. The locations whose view of an object changed get
//     a MODIFIED (an ADDED for an object withheld until now) whose object shows fresh, a
//     resourceVersion no client has seen before, so clients that skip updates with an
//     unchanged resourceVersion (informer resyncs) see it. An event of the source between the
//     store's old resourceVersion and fresh that arrives afterwards (the resource's stream was
//     behind) cannot be placed in order: the store then ends its watches and restarts its
//     history (noteStreamLocked), and clients relist.
//   - otherwise the re-rendering shares the store's resourceVersion R, ordered after the
//     events at R; a watch resumed from R replays it (a client that saw R before it never
//     misses it; one that saw it gets it again, unchanged). Its objects show R, which a client
//     that last saw the object at R does not recognise as a change until the next one.
//
// Continue tokens of lists taken before answer 410 for the locations whose views changed.
//
// A rendering that fails under the new rules keeps the location's last rendering (never a
// deletion), as at ingest. The renderings are made before the store's read lock is taken:
// readers are blocked only while the events are applied. With a Renderer
// (StoreOptions.Renderer) the renderings that run CEL are not made here but deferred, as at
// ingest: the views keep their renderings until a worker made the new ones, which it applies
// as re-renderings of their own (applyRenderings); only the others (a location no
// Customization selects any more) are made and applied here.
func (s *ResourceStore) SetRules(rules Rules, fresh uint64) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	old := s.rules.load()
	s.rules.p.Store(&rulesHolder{rules: rules})
	if old == rules {
		return
	}
	type rerender struct {
		prev, obj           *Object
		changed, statusOnly map[string]bool
	}
	var work []rerender
	// Holding writeMu, the writer may read s.objects, s.rv and s.synced without mu.
	rv, shared := s.rv, true
	if fresh > s.rv && s.synced {
		rv, shared = fresh, false
	}
	rebound := bindingChanges(rules, old)
	for _, o := range s.objects {
		var affected []string
		for _, loc := range o.assigned {
			if rulesDiffer(rules, old, s.gvr, o, loc) {
				affected = append(affected, loc)
			}
		}
		rebind := rebound.Has(o.cluster, o.namespace)
		if len(affected) == 0 && !rebind {
			continue
		}
		u, err := o.Content() // decoded only for the objects the change affects
		if err != nil {
			continue // logged by Content: the views stay as they are
		}
		n, err := s.build(identityOf(o, u), o)
		if err != nil {
			continue // impossible: a decoded identity (identity.tree)
		}
		if rebind {
			// The locations bound to its namespace changed (bound.go): every location it had
			// or has now may gain or lose it.
			affected = unionSorted(o.assigned, n.assigned)
		}
		changed, statusOnly := map[string]bool{}, map[string]bool{}
		for _, loc := range affected {
			switch {
			case !n.HasLocation(loc):
				if o.HasLocation(loc) {
					changed[loc] = true // no longer bound: DELETED
				}
				// Else withheld or unbound before and still: nothing to show.
			case !o.HasLocation(loc):
				changed[loc] = true // withheld until now: ADDED
			case n.lastGood[loc] != nil:
				// Fails under the new rules: keeps showing the last rendering.
			default:
				compareRendering(changed, statusOnly, o, n, u, loc)
			}
		}
		work = append(work, rerender{prev: o, obj: n, changed: changed, statusOnly: statusOnly})
	}
	if len(work) == 0 {
		return
	}
	if !slices.ContainsFunc(work, func(w rerender) bool { return len(w.changed) > 0 }) {
		// No view changed now (the renderings that run CEL are pending, made by the
		// Renderer later: applyRenderings): nothing is an event, and the store's
		// resourceVersion stays.
		rv, shared = s.rv, true
	}
	for _, w := range work {
		w.obj.visible = rerenderedVisibility(w.prev, w.obj, rv, w.changed, w.statusOnly)
		if w.obj.variants == nil {
			w.obj.variants = &locationVariants{}
		}
		w.obj.compact(w.prev)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	events := 0
	for _, w := range work {
		for loc := range w.changed {
			s.snaps.drop(loc)
		}
		events += len(w.changed)
		s.applyLocked(&event{typ: watch.Modified, rv: rv, obj: w.obj, prev: w.prev, rerendered: w.changed, sharedRV: shared}, len(w.changed) > 0)
		s.enqueuePending(w.obj)
	}
	s.notifyLocked()
	klog.V(2).InfoS("Re-rendered the views of a resource after a change of the Customizations or locations",
		"resource", s.gvr.GroupResource().String(), "objects", len(work), "viewChanges", events, "resourceVersion", rv, "sharedResourceVersion", shared)
}

// identityOf returns the identity a stored object was built from, to build it again; u is
// its content (Object.content).
func identityOf(o *Object, u *unstructured.Unstructured) identity {
	return identity{u: u, key: o.key, cluster: o.cluster, namespace: o.namespace, name: o.name, uid: o.uid,
		rvString: o.rvString, annotations: u.GetAnnotations(), edit: o.edit}
}

// compareRendering compares location's view of prev (u its content) with its view of obj, a
// re-rendering of the same source version, both shown to location: when they differ, it adds
// location to changed, and to statusOnly when they differ in .status alone while prev's view
// showed another generation than obj's own. Such a view keeps the generation it showed, as at
// ingest (setVisibility): a view's generation moves only with what it shows outside .status
// (docs/status.md, "Summarize"), also when its rendering was deferred and a location's own
// status record moved the source's generation.
func compareRendering(changed, statusOnly map[string]bool, prev, obj *Object, u *unstructured.Unstructured, location string) {
	was, is := prev.renderingOf(u, location), obj.view(location)
	if sameView(was, is) {
		return
	}
	changed[location] = true
	if prev.ViewGeneration(location) != obj.generation && sameContent(was, is, true, false) {
		statusOnly[location] = true
	}
}

// rerenderedVisibility returns the visible resourceVersions of obj, a re-rendering at rv of
// prev (same source version): rv for the locations whose view changed
// (changed) or that did not show prev, prev's visible resourceVersion for every other location,
// with the generation its view showed (VisibleGeneration), which a location of statusOnly (its
// view changed in .status alone: compareRendering) keeps showing too. A changed location that
// shows the rendering of an older version (lastGood) shows that version's generation.
func rerenderedVisibility(prev *Object, obj *Object, rv uint64, changed, statusOnly map[string]bool) *visibleVersions {
	base := prev.rv
	if prev.visible != nil {
		base = prev.visible.base
	}
	vis := &visibleVersions{base: base, byLocation: make(map[string]uint64, len(obj.locations)),
		baseGeneration: prev.generation, generations: map[string]int64{}}
	if prev.visible != nil {
		vis.baseGeneration = prev.visible.baseGeneration
	}
	for _, loc := range obj.locations {
		if changed[loc] || !prev.HasLocation(loc) {
			vis.byLocation[loc] = rv
			switch {
			case statusOnly[loc]:
				vis.generations[loc] = prev.ViewGeneration(loc)
			case obj.rendered[loc] == nil && obj.lastGood[loc] != nil:
				// Shows the rendering of an older version while this one's is pending
				// (withRenderings): with that version's generation, which it holds, so that a
				// view shows one generation per resourceVersion whichever version renders it.
				vis.generations[loc] = obj.lastGood[loc].GetGeneration()
			}
		} else {
			vis.byLocation[loc] = prev.VisibleResourceVersion(loc)
			vis.generations[loc] = prev.ViewGeneration(loc)
		}
	}
	return vis
}

// SetRules makes every store of the cache, and every store created later, render with rules
// (ResourceStore.SetRules, with the source's current resourceVersion of the store's resource
// read first, each read within rulesProbeTimeout). The first call also releases Run when
// Config.WaitForRules is set.
//
// The reads of the source run concurrently (at most rulesProbeWorkers at once) and hold no
// lock: a slow or unreachable source delays this call, never another one. The stores are then
// re-rendered in turn, under rulesMu; a call whose rules were superseded by a later call
// meanwhile re-renders nothing (the later call re-renders every store with its newer rules),
// so the stores never go back to older rules.
func (c *Cache) SetRules(rules Rules) {
	c.mu.Lock()
	c.rules.p.Store(&rulesHolder{rules: rules})
	c.rulesSeq++
	seq := c.rulesSeq
	stores := make([]*ResourceStore, 0, len(c.mirrors))
	for _, m := range c.mirrors {
		stores = append(stores, m.store)
	}
	c.mu.Unlock()
	c.rulesOnce.Do(func() { close(c.rulesSet) })
	slices.SortFunc(stores, func(a, b *ResourceStore) int { return strings.Compare(a.gvr.String(), b.gvr.String()) })
	fresh := make([]uint64, len(stores))
	workqueue.ParallelizeUntil(context.Background(), rulesProbeWorkers, len(stores), func(i int) {
		s := stores[i]
		if !s.HasSynced() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), rulesProbeTimeout)
		defer cancel()
		rv, err := c.cfg.Source.ResourceVersion(ctx, s.gvr)
		if err != nil {
			klog.InfoS("Reading the source's resourceVersion for a re-rendering failed; re-rendering at the store's resourceVersion",
				"resource", s.gvr.GroupResource().String(), "err", contract.Truncate(err.Error(), maxLoggedValue))
		}
		fresh[i] = rv
	})

	c.rulesMu.Lock()
	defer c.rulesMu.Unlock()
	c.mu.RLock()
	superseded := c.rulesSeq != seq
	c.mu.RUnlock()
	if superseded {
		return
	}
	for i, s := range stores {
		s.SetRules(rules, fresh[i])
	}
}

// rulesProbeWorkers is how many reads of the source's resourceVersion SetRules has in flight.
const rulesProbeWorkers = 8

// rulesProbeTimeout bounds the read of the source's resourceVersion before a re-rendering.
const rulesProbeTimeout = 10 * time.Second

// RenderFailures returns the (object, location) pairs of every store whose current version does
// not render (ResourceStore.RenderFailures).
func (c *Cache) RenderFailures() []RenderFailure {
	c.mu.RLock()
	stores := make([]*ResourceStore, 0, len(c.mirrors))
	for _, m := range c.mirrors {
		stores = append(stores, m.store)
	}
	c.mu.RUnlock()
	var out []RenderFailure
	for _, s := range stores {
		out = append(out, s.RenderFailures()...)
	}
	return out
}
