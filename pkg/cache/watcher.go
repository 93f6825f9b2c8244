package cache

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// watcher is one location-view watch: a watch.Interface fed by the store's dispatcher.
//
// Like the cacher's cacheWatcher it owns a bounded input buffer (queue, an eventQueue) that the
// dispatcher fills without ever blocking, and one goroutine that first emits the watch's initial events (the
// snapshot or the history replay, which never go through the buffer) and then forwards the
// buffer to the consumer (result). A full buffer terminates the watcher (the client re-watches
// from its last resourceVersion).
type watcher struct {
	store     *ResourceStore
	location  string
	pred      func(*Object) bool
	bookmarks bool

	queue  *eventQueue
	result chan watch.Event
	done   chan struct{}

	stopOnce sync.Once

	// lastQueuedRV is the highest RV of anything handed to the watcher (initial state or
	// queued event); periodic bookmarks are only queued when the store moved past it.
	lastQueuedRV atomic.Uint64

	// Guarded by the store's mutex.
	loc        *locationIndex
	pos        int
	registered bool
}

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
	// prefix, when not "", is the key prefix of the one logical cluster the watch shows: only
	// that range of snapshot is visited.
	prefix contract.Key
}

var _ watch.Interface = &watcher{}

// ResultChan implements watch.Interface.
func (w *watcher) ResultChan() <-chan watch.Event { return w.result }

// Stop implements watch.Interface: it ends the watch and unregisters it. Idempotent; the
// result channel is closed shortly after (once the watcher goroutine noticed).
func (w *watcher) Stop() {
	w.signalStop()
	w.store.unregister(w)
}

// signalStop makes the watcher goroutine exit (without draining its buffer). Safe to call with
// the store's mutex held.
func (w *watcher) signalStop() {
	w.stopOnce.Do(func() { close(w.done) })
}

// run is the watcher goroutine.
func (w *watcher) run(ctx context.Context, init initialEvents) {
	defer close(w.result)
	defer w.Stop()

	switch {
	case init.initial:
		if init.snapshot == nil {
			break
		}
		ok := true
		iter := func(o *Object) bool {
			if init.prefix != "" && !strings.HasPrefix(string(o.key), string(init.prefix)) {
				return false
			}
			if w.pred != nil && !w.pred(o) {
				return true
			}
			ok = w.send(ctx, watch.Event{Type: watch.Added, Object: o})
			return ok
		}
		if init.prefix != "" {
			init.snapshot.AscendGreaterOrEqual(&Object{key: init.prefix}, iter)
		} else {
			init.snapshot.Ascend(iter)
		}
		if !ok {
			return
		}
	case init.replay != nil:
		for _, e := range init.replay {
			if ev, ok := e.forLocation(w.location, w.pred); ok {
				if !w.send(ctx, ev) {
					return
				}
			}
		}
	}
	if init.endBookmark {
		bm := watch.Event{Type: watch.Bookmark, Object: newBookmark(w.store.gvk, init.rv, true)}
		if !w.send(ctx, bm) {
			return
		}
	}

	var tick <-chan time.Time
	if w.bookmarks {
		t := w.store.clock.NewTicker(w.store.opts.BookmarkInterval)
		defer t.Stop()
		tick = t.C()
	}
	for {
		select {
		case <-w.done:
			return
		case <-ctx.Done():
			return
		case <-w.queue.ready:
			for _, ev := range w.queue.take() {
				if !w.send(ctx, ev) {
					return
				}
			}
		case <-tick:
			w.store.queueBookmark(w)
		}
	}
}

// send hands ev to the consumer; false when the watch ended meanwhile.
func (w *watcher) send(ctx context.Context, ev watch.Event) bool {
	if o, ok := ev.Object.(*Object); ok {
		ev.Object = o.ForLocation(w.location)
	}
	select {
	case <-w.done:
		return false
	default:
	}
	select {
	case w.result <- ev:
		return true
	case <-w.done:
		return false
	case <-ctx.Done():
		return false
	}
}
