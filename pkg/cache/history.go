package cache

import (
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/watch"
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

	deletedPrevOnce sync.Once
	deletedPrevObj  *Object
}

// deletedPrev returns the object of the DELETED event sent to a watcher that saw prev but does
// not see obj (location unassigned or selector no longer matching): prev's content with
// metadata.resourceVersion set to the event's RV, as kube-apiserver's cacher does. It is built
// at most once per event and shared by all watchers (so it is encoded once, too).
func (e *event) deletedPrev() *Object {
	e.deletedPrevOnce.Do(func() {
		if e.prev.rv == e.rv {
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
// location and passing the predicate":
//
//	old & new → MODIFIED(obj); only new → ADDED(obj); only old → DELETED(prev at the event's RV,
//	or the final state for a source delete); neither → nothing.
func (e *event) forWatcher(inOld, inNew bool, pred func(*Object) bool) (watch.Event, bool) {
	oldPasses := inOld && e.prev != nil && (pred == nil || pred(e.prev))
	if e.typ == watch.Deleted {
		if oldPasses {
			return watch.Event{Type: watch.Deleted, Object: e.obj}, true
		}
		return watch.Event{}, false
	}
	newPasses := inNew && (pred == nil || pred(e.obj))
	switch {
	case oldPasses && newPasses:
		return watch.Event{Type: watch.Modified, Object: e.obj}, true
	case newPasses:
		return watch.Event{Type: watch.Added, Object: e.obj}, true
	case oldPasses:
		return watch.Event{Type: watch.Deleted, Object: e.deletedPrev()}, true
	}
	return watch.Event{}, false
}

// forLocation is forWatcher for a watcher that does not know inOld/inNew yet (history replay).
func (e *event) forLocation(location string, pred func(*Object) bool) (watch.Event, bool) {
	inOld := e.prev != nil && e.prev.HasLocation(location)
	inNew := e.typ != watch.Deleted && e.obj.HasLocation(location)
	if (!inOld && !inNew) || !e.changesView(location, inOld, inNew) {
		return watch.Event{}, false
	}
	return e.forWatcher(inOld, inNew, pred)
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
// equivalent of the watch cache's cyclic buffer.
//
// events only ever grows at the end and is cut at the front, and elements are never
// overwritten, so a sub-slice handed to a watcher stays valid and race-free while new events
// are appended (appends write beyond the sub-slice's length, or into a new array).
type history struct {
	events []*event
	size   int
	// start is the lowest resourceVersion a watch can resume from: every event with a greater
	// RV is still in events. It is the RV of the first Replace, then of the newest evicted
	// event.
	start uint64
}

// add appends e, evicting the oldest event when the history is full.
func (h *history) add(e *event) {
	if len(h.events) >= h.size {
		n := len(h.events) - h.size + 1
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
		// includes them. The backing array is dropped when append next reallocates.
		h.events = h.events[n:]
	}
	h.events = append(h.events, e)
}

// reset drops all events; watches can resume from rv on.
func (h *history) reset(rv uint64) {
	h.events = nil
	h.start = rv
}

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
