package cache

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// watcher is one location-view watch: a watch.Interface fed by the store's dispatcher.
//
// Like the cacher's cacheWatcher it never blocks the dispatcher and holds at most a bounded
// number of events for a consumer that lags (StoreOptions.WatcherBufferSize): past it, the
// watcher is terminated and its client re-watches from its last resourceVersion. Unlike the
// cacheWatcher it has no goroutine of its own while its consumer keeps up: the dispatcher puts
// each event straight into the result channel (delivery.go). A goroutine (pump) runs only to
// emit the watch's initial events (the snapshot or the history replay) and, later, while
// events wait for the consumer. An idle watch so costs no goroutine stack and no ticker
// (periodic bookmarks come from one timer per store, periodic.go), and a delivered event
// wakes one goroutine, the consumer's, instead of two (serving CPU and
// memory per idle watch with 10,000 watches).
type watcher struct {
	store     *ResourceStore
	location  string
	pred      func(*Object) bool
	bookmarks bool
	// limit is the most events that may wait for the consumer (WatcherBufferSize).
	limit int

	// result is the consumer's channel (resultBuffer events, fewer if limit is lower); closed
	// once the watch ended and no goroutine sends to it any more.
	result chan watch.Event
	// done is closed when the watch ends: a blocked send gives up.
	done     chan struct{}
	stopOnce sync.Once

	// lastQueuedRV is the highest RV of anything handed to the watcher (initial state or
	// delivered event); periodic bookmarks are only sent when the store moved past it.
	lastQueuedRV atomic.Uint64

	// mu guards the delivery state (delivery.go). It is taken after the store's mutex, never
	// before it.
	mu sync.Mutex
	// pending are the events that wait, in order, for the pump to send them.
	pending []watch.Event
	// pumping says the pump goroutine runs: it owns sending, and every new event goes to
	// pending behind what it has still to send.
	pumping bool
	// stopped says the watch ended; closed that result is closed.
	stopped, closed bool
	// stopContext unregisters the context.AfterFunc that stops the watch when its context ends.
	stopContext func() bool

	// Guarded by the store's mutex.
	loc        *locationIndex
	pos        int
	registered bool
}

// resultBuffer is the capacity of a watcher's result channel: events the dispatcher can hand
// over without a goroutine of the watcher's own while the consumer is busy writing the
// previous one. 32 bytes per slot.
const resultBuffer = 8

// initialEvents is what a watcher emits before its live events.
type initialEvents struct {
	// snapshot, when not nil, is the location's state at rv: every matching object is sent
	// as ADDED (InitialEvents).
	snapshot *btree.BTreeG[*Object]
	// replay are history events with RV > the resume RV (resume from ResourceVersion).
	replay []*event
	// replayFrom is the resume RV of a replay.
	replayFrom uint64
	// initial says the watch starts with the location's state (snapshot may be nil if
	// the location was empty).
	initial bool
	// rv is the watch's starting resourceVersion.
	rv uint64
	// endBookmark asks for the KEP-3157 "initial events end" bookmark after the snapshot.
	endBookmark bool
	// part is the part of the location the watch shows: only its key ranges of snapshot are
	// visited (ascendPart).
	part contract.ViewPart
}

// empty reports whether there is nothing to emit before the live events.
func (init *initialEvents) empty() bool {
	return init.snapshot == nil && len(init.replay) == 0 && !init.endBookmark
}

var _ watch.Interface = &watcher{}

// newWatcher returns a watcher of location that has not started delivering: until start,
// delivered events wait in pending (behind the initial events).
func newWatcher(s *ResourceStore, location string, opts WatchOptions) *watcher {
	return &watcher{
		store:     s,
		location:  location,
		pred:      opts.Predicate,
		bookmarks: opts.AllowBookmarks,
		limit:     s.opts.WatcherBufferSize,
		result:    make(chan watch.Event, min(resultBuffer, s.opts.WatcherBufferSize)),
		done:      make(chan struct{}),
		pumping:   true,
	}
}

// start makes the watch deliver: a pump goroutine emits init, or, when there is nothing to emit
// first, events go straight to the result channel from now on. The watch stops when ctx ends.
// Called with the store's mutex held since the watcher was registered, so nothing is pending.
func (w *watcher) start(ctx context.Context, init initialEvents) {
	stopContext := context.AfterFunc(ctx, w.Stop)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		stopContext()
		w.pumping = false
		w.closeIfStoppedLocked()
		return
	}
	w.stopContext = stopContext
	if init.empty() { // and nothing is pending: the store's lock is still held since registration
		w.pumping = false
		return
	}
	go w.pump(&init)
}

// ResultChan implements watch.Interface.
func (w *watcher) ResultChan() <-chan watch.Event { return w.result }

// Stop implements watch.Interface: it ends the watch and unregisters it. Idempotent. The result
// channel is closed at once, or, while the pump is blocked sending, as soon as it noticed;
// events already in the channel's buffer may still be read before it closes.
func (w *watcher) Stop() {
	w.signalStop()
	w.store.unregister(w)
}

// signalStop ends the watch without unregistering it: a blocked send gives up, nothing more is
// delivered, and the result channel closes (deliveryStopped). Safe to call with the store's
// mutex held.
func (w *watcher) signalStop() {
	w.stopOnce.Do(func() {
		close(w.done)
		w.deliveryStopped()
	})
}

// sendInitial emits init (the snapshot as ADDED events, or the history replay, then the end
// bookmark when asked for); false when the watch ended meanwhile.
func (w *watcher) sendInitial(init *initialEvents) bool {
	switch {
	case init.initial:
		if init.snapshot == nil {
			break
		}
		ok := ascendPart(init.snapshot, init.part, "", func(o *Object) bool {
			if w.pred != nil && !w.pred(o.selectable(w.location)) {
				return true
			}
			return w.send(watch.Event{Type: watch.Added, Object: o})
		})
		if !ok {
			return false
		}
	case init.replay != nil:
		for _, e := range init.replay {
			if ev, ok := e.forLocation(w.location, w.pred); ok {
				if !w.send(ev) {
					return false
				}
			}
		}
	}
	if init.endBookmark {
		return w.send(watch.Event{Type: watch.Bookmark, Object: newBookmark(w.store.gvk, init.rv, true)})
	}
	return true
}
