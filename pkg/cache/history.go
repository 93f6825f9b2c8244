package cache

import (
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/component-base/metrics"
)

// event is one change of the source, as kept in the history and dispatched to watchers.
// Events are immutable once recorded, except for the lazily built deletedPrev.
type event struct {
	// typ is the source-level change: Added, Modified or Deleted.
	typ watch.EventType
	// rv is the event's resourceVersion (the source's).
	rv uint64
	// obj is the new object version; for Deleted the object's final state (its
	// metadata.resourceVersion is the delete's RV).
	obj *Object
	// prev is the object version before the event; nil for Added.
	prev *Object
	// rerendered, when not nil, marks a re-rendering after a change of the rules
	// (ResourceStore.SetRules), not a change of the source: obj is prev's source version
	// rendered anew, and the event changes the view of exactly these locations. It is ordered
	// after the source's events at rv, and a watch resumed from rv replays it.
	rerendered map[string]bool
	// sharedRV marks a re-rendering that shares rv with earlier events (no fresh
	// resourceVersion was available): a watch resumed from rv replays it.
	sharedRV bool

	// at is when the event was recorded (UnixNano), for the history's age bound.
	at int64
	// cost is the memory the event keeps alive in the history (history.add).
	cost int64

	deletedPrevOnce sync.Once
	deletedPrevObj  *Object
}

// deletedPrev returns the object of the DELETED event sent to a watcher that saw prev but does
// not see obj (location unassigned or selector no longer matching): prev's content with
// metadata.resourceVersion set to the event's RV, as kube-apiserver's cacher does. It is built
// at most once per event and shared by all watchers (so it is encoded once, too).
func (e *event) deletedPrev() *Object {
	e.deletedPrevOnce.Do(func() {
		if e.prev.rv == e.rv && e.prev.visible == nil {
			// Every view of prev shows the event's resourceVersion already. (A re-rendering
			// at prev's own resourceVersion does not: its views show their visible ones.)
			e.deletedPrevObj = e.prev
			return
		}
		e.deletedPrevObj = e.prev.withResourceVersion(e.rv)
	})
	return e.deletedPrevObj
}

// forWatcher turns the event into what a watcher of location with predicate pred must see, if
// anything. inOld/inNew say whether prev/obj are assigned to location. This is the decision of
// the cacher's cacheWatcher.convertToWatchEvent, with "matches" meaning "assigned to the
// location and its view passing the predicate" (Object.selectable):
//
//	old & new → MODIFIED(obj); only new → ADDED(obj); only old → DELETED(prev at the event's RV,
//	or the final state for a source delete); neither → nothing.
func (e *event) forWatcher(location string, inOld, inNew bool, pred func(*Object) bool) (watch.Event, bool) {
	typ, fromPrev, ok := e.sends(location, inOld, inNew, pred)
	switch {
	case !ok:
		return watch.Event{}, false
	case fromPrev:
		return watch.Event{Type: typ, Object: e.deletedPrev()}, true
	}
	return watch.Event{Type: typ, Object: e.obj}, true
}

// sends is forWatcher's decision without the object: the event type, and whether the object
// sent is prev's content (a DELETED of an object that stopped matching) rather than obj.
func (e *event) sends(location string, inOld, inNew bool, pred func(*Object) bool) (typ watch.EventType, fromPrev, ok bool) {
	oldPasses := inOld && e.prev != nil && (pred == nil || pred(e.prev.selectable(location)))
	if e.typ == watch.Deleted {
		return watch.Deleted, false, oldPasses
	}
	newPasses := inNew && (pred == nil || pred(e.obj.selectable(location)))
	switch {
	case oldPasses && newPasses:
		return watch.Modified, false, true
	case newPasses:
		return watch.Added, false, true
	case oldPasses:
		return watch.Deleted, true, true
	}
	return "", false, false
}

// forLocation is forWatcher for a watcher that does not know inOld/inNew yet (history replay).
func (e *event) forLocation(location string, pred func(*Object) bool) (watch.Event, bool) {
	inOld, inNew, ok := e.concerns(location)
	if !ok {
		return watch.Event{}, false
	}
	return e.forWatcher(location, inOld, inNew, pred)
}

// concerns reports whether the event changes what location sees, and whether prev/obj are
// assigned to it.
func (e *event) concerns(location string) (inOld, inNew, ok bool) {
	inOld = e.prev != nil && e.prev.HasLocation(location)
	inNew = e.typ != watch.Deleted && e.obj.HasLocation(location)
	return inOld, inNew, (inOld || inNew) && e.changesView(location, inOld, inNew)
}

// needsDropped reports whether a replay of the event to a watcher of location with predicate
// pred would have to send content the history dropped (history.add: a large version,
// superseded). Such a resume answers 410 (Watch).
func (e *event) needsDropped(location string, pred func(*Object) bool) bool {
	if !e.obj.dropped && (e.prev == nil || !e.prev.dropped) {
		return false
	}
	inOld, inNew, ok := e.concerns(location)
	if !ok {
		return false
	}
	_, fromPrev, ok := e.sends(location, inOld, inNew, pred)
	switch {
	case !ok:
		return false
	case fromPrev:
		return e.prev.dropped
	}
	return e.obj.dropped
}

// changesView reports whether the event changes what location sees, given whether prev/obj
// are assigned to it: always when the object enters or leaves the location or is deleted;
// for an object the location holds before and after, only when its view of the object
// changed (Object.VisibleResourceVersion). The live fan-out and the history replay both ask
// this, so a watch and a resume from any resourceVersion show the same events.
func (e *event) changesView(location string, inOld, inNew bool) bool {
	if e.rerendered != nil {
		return e.rerendered[location]
	}
	return e.typ == watch.Deleted || !inOld || !inNew || e.obj.viewChangedFor(location)
}

// history is the bounded, RV-ordered list of recent events used to resume watches, the
// equivalent of the watch cache's cyclic buffer. It is bounded four ways (docs/views.md,
// "Event history"):
//
//   - by count (size, --watch-history-size per resource);
//   - by age (maxAge, --watch-history-age): an event older than that is dropped, as
//     kube-apiserver's watch cache keeps about 75 s of events;
//   - by memory, across resources (budget, --watch-history-memory): what the history keeps
//     alive is the object versions its events hold that the store no longer does (a version
//     superseded by a newer one, a deleted object's final state), estimated per event (cost);
//     when the resources' histories together hold more than the budget, the history that adds
//     an event drops its oldest ones while it holds more than its fair share of the budget
//     (the budget over the histories that hold any), so that a resource written with large
//     objects drops its own history, not the others';
//   - by object size (maxObjectSize, --watch-history-max-object-size): a version larger than
//     that is not kept once superseded (its events keep its header only: key, labels,
//     locations, resourceVersions), so writes of a large object cost the history nothing. A
//     resume that would have to send such a version answers 410 (Watch).
//
// A resume from a resourceVersion older than what is kept answers 410 Gone, and the client
// relists, as with kube-apiserver.
//
// events only ever grows at the end and is cut at the front, and elements are never
// overwritten, so a sub-slice handed to a watcher stays valid and race-free while new events
// are appended (appends write beyond the sub-slice's length, or into a new array). Dropping a
// large version's content replaces one event in a new copy of the array.
type history struct {
	events []*event
	size   int
	maxAge time.Duration
	// maxObjectSize is the JSON size above which a superseded version is not kept (0: none).
	maxObjectSize int
	budget        *HistoryBudget
	// bytes is the sum of the events' cost.
	bytes int64
	// evictedBytes is the cost of the evicted events that events' backing array still holds
	// before its first element (cut does not clear them, and append drops them only when it
	// reallocates): cut copies the live events into a new array once they cost more than an
	// eighth of the live ones, so that the history keeps alive at most about 9/8 of its bytes
	// (without it, up to twice: a budget of 64 MiB held 130 MiB). The copy moves pointers
	// only: at most about 8 per evicted event, amortized.
	evictedBytes int64
	// start is the lowest resourceVersion a watch can resume from: every event with a greater
	// RV is still in events. It is the RV of the first Replace, then of the newest evicted
	// event.
	start uint64
	// evicted counts the dropped events by reason (metrics).
	evicted evictionCounters
}

// evictionCounters are the counters of dropped events of one resource, by reason.
type evictionCounters struct{ count, age, memory, large metrics.CounterMetric }

// eventOverhead is the estimated memory of an event (96 bytes) and of the Object and strings of
// the version it supersedes (about 500) beyond its JSON: what an event costs the history at
// least.
const eventOverhead = 640

// add appends e at now, dropping the content of a large version it supersedes, and then the
// oldest events the bounds require (trim).
func (h *history) add(e *event, now time.Time) {
	e.at = now.UnixNano()
	if e.prev != nil && h.large(e.prev) {
		// e supersedes a large version: no event keeps its content from now on.
		h.dropContent(e.prev)
		e.prev = e.prev.header()
		h.evicted.large.Inc()
	}
	if e.typ == watch.Deleted && h.large(e.obj) {
		e.obj = e.obj.header()
	}
	e.cost = eventOverhead
	if e.prev != nil {
		// The version e supersedes lives on in the history only.
		e.cost += e.prev.memSize()
	}
	if e.typ == watch.Deleted {
		e.cost += e.obj.memSize()
	}
	if len(h.events) == cap(h.events) {
		// append reallocates: the new array holds no evicted events.
		h.evictedBytes = 0
	}
	h.events = append(h.events, e)
	h.charge(e.cost)
	h.trim(now)
}

// large reports whether o is a version whose content the history does not keep once
// superseded.
func (h *history) large(o *Object) bool {
	return h.maxObjectSize > 0 && !o.dropped && o.jsonSize() > h.maxObjectSize
}

// dropContent replaces the event that holds o as its new version (the newest such, found from
// the end) by one that holds o's header only, in a new copy of the array (watchers replaying
// the old one keep it).
func (h *history) dropContent(o *Object) {
	for i := len(h.events) - 1; i >= 0; i-- {
		e := h.events[i]
		if e.obj != o {
			continue
		}
		events := slices.Clone(h.events)
		h.evictedBytes = 0 // the copy holds no evicted events
		events[i] = &event{typ: e.typ, rv: e.rv, obj: o.header(), prev: e.prev, rerendered: e.rerendered,
			sharedRV: e.sharedRV, at: e.at, cost: e.cost}
		h.events = events
		return
	}
}

// charge adds cost to the history's bytes and to the budget's.
func (h *history) charge(cost int64) {
	if h.bytes == 0 && cost > 0 {
		h.budget.holders(1)
	}
	h.bytes += cost
	h.budget.add(cost)
	if h.bytes == 0 && cost < 0 {
		h.budget.holders(-1)
	}
}

// trim drops the oldest events that the bounds (count, age, and the memory budget: see
// history) require at now.
func (h *history) trim(now time.Time) {
	oldest := now.Add(-h.maxAge).UnixNano()
	n := 0
	for n < len(h.events) {
		e := h.events[n]
		switch {
		case len(h.events)-n > h.size:
			h.evicted.count.Inc()
		case h.maxAge > 0 && e.at < oldest:
			h.evicted.age.Inc()
		case h.budget.over() && h.bytes > h.budget.fairShare():
			h.evicted.memory.Inc()
		default:
			h.cut(n)
			return
		}
		h.charge(-e.cost)
		h.evictedBytes += e.cost
		n++
	}
	h.cut(n)
}

// cut drops the first n events, moving start past them.
func (h *history) cut(n int) {
	if n == 0 {
		return
	}
	last := h.events[n-1]
	start := last.rv
	if last.sharedRV {
		// A resume from last.rv would need the evicted re-rendering (resumeFrom).
		start++
	}
	if start > h.start {
		h.start = start
	}
	// Evicted elements are not cleared: a watcher may still be replaying a view that
	// includes them. The backing array is dropped when append next reallocates, or here once
	// the evicted events it holds cost more than an eighth of the live ones (evictedBytes; a
	// watcher replaying the old array keeps it until it is done).
	h.events = h.events[n:]
	switch {
	case len(h.events) == 0:
		h.events = nil // the array held the evicted events' objects
		h.evictedBytes = 0
	case h.evictedBytes > h.bytes/8:
		h.events = slices.Clone(h.events)
		h.evictedBytes = 0
	}
}

// needsTrim reports whether trim would drop an event at now (a cheap check for the periodic
// sweep, Cache.sweepHistories).
func (h *history) needsTrim(now time.Time) bool {
	if len(h.events) == 0 {
		return false
	}
	return (h.maxAge > 0 && h.events[0].at < now.Add(-h.maxAge).UnixNano()) ||
		(h.budget.over() && h.bytes > h.budget.fairShare())
}

// reset drops all events; watches can resume from rv on.
func (h *history) reset(rv uint64) {
	h.events = nil
	h.evictedBytes = 0
	h.charge(-h.bytes)
	h.start = rv
}

// HistoryBudget is the memory the event histories of all the stores that share it may keep
// alive together (--watch-history-memory; see history). Safe for concurrent use; a nil
// *HistoryBudget is no budget.
type HistoryBudget struct {
	limit int64
	used  atomic.Int64
	// histories counts the histories that hold any bytes (fairShare).
	histories atomic.Int64
}

// NewHistoryBudget returns a budget of limit bytes (0 or less: none, nil).
func NewHistoryBudget(limit int64) *HistoryBudget {
	if limit <= 0 {
		return nil
	}
	return &HistoryBudget{limit: limit}
}

// Used returns the bytes the histories hold now (0 for nil).
func (b *HistoryBudget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// add counts delta bytes (negative: released).
func (b *HistoryBudget) add(delta int64) {
	if b == nil || delta == 0 {
		return
	}
	historyBytes.Set(float64(b.used.Add(delta)))
}

// holders counts a history that starts (+1) or stops (-1) holding bytes.
func (b *HistoryBudget) holders(delta int64) {
	if b != nil {
		b.histories.Add(delta)
	}
}

// over reports whether the histories hold more than the budget.
func (b *HistoryBudget) over() bool { return b != nil && b.used.Load() > b.limit }

// fairShare is the budget divided by the histories that hold any bytes.
func (b *HistoryBudget) fairShare() int64 { return b.limit / max(1, b.histories.Load()) }

// resumeFrom returns the events a watch resumed from rv must replay (a shared, read-only
// view): those with RV > rv, and the re-renderings that share rv, which follow the source's
// events at rv (event.sharedRV).
func (h *history) resumeFrom(rv uint64) []*event {
	i := sort.Search(len(h.events), func(i int) bool {
		e := h.events[i]
		return e.rv > rv || (e.rv == rv && e.sharedRV)
	})
	return h.events[i:len(h.events):len(h.events)]
}

// since returns the events with RV > rv (a shared, read-only view).
func (h *history) since(rv uint64) []*event {
	i := sort.Search(len(h.events), func(i int) bool { return h.events[i].rv > rv })
	return h.events[i:len(h.events):len(h.events)]
}
