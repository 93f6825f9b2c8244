package cache

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// WatchOptions configures ResourceStore.Watch.
type WatchOptions struct {
	// ResourceVersion is the resume point: every event with a greater RV that affects the
	// location and passes Predicate is sent, none with a smaller or equal one. 0 means "from
	// now" (the store's current RV). Ignored with InitialEvents.
	ResourceVersion uint64
	// InitialEvents sends first an ADDED event for every object of the location that passes
	// Predicate (the state at the start of the watch), then the live events. The view uses it
	// for resourceVersion "" and "0" and for sendInitialEvents=true.
	InitialEvents bool
	// InitialEventsEndBookmark, with InitialEvents, sends after the initial events a BOOKMARK
	// whose object carries the annotation "k8s.io/initial-events-end": "true" and the RV of
	// the initial state (KEP-3157 streaming lists, sendInitialEvents=true). It is sent when
	// requested, whatever AllowBookmarks says. For sendInitialEvents=true with a
	// resourceVersion (NotOlderThan) or a consistent read, call WaitForResourceVersion first:
	// the initial state is the store's state when Watch registers.
	InitialEventsEndBookmark bool
	// AllowBookmarks asks for periodic BOOKMARK events with the store's current RV, one
	// StoreOptions.BookmarkInterval after the watch starts and then after each (periodic.go),
	// when the store moved past what the watch was handed; the object holds the resource's
	// apiVersion/kind and metadata.resourceVersion only (bookmark), shared by the watchers that
	// get it at one tick.
	AllowBookmarks bool
	// Predicate selects the objects the watch shows (label/field selectors, namespace); nil
	// selects all of the location's objects. It must be cheap and safe for concurrent use.
	Predicate func(*Object) bool
	// Part, when not the whole location, restricts the watch to a part of it (some logical
	// clusters, a hash shard; contract.ViewPart): the initial events visit only the part's key
	// ranges, and a live event is checked with the part's Contains (a cluster comparison and
	// one hash of the object's cluster and namespace; part.go).
	Part contract.ViewPart
}

// Watch starts a watch on the objects of location.
//
// Each event the source makes to an object becomes, for this watch, ADDED / MODIFIED / DELETED
// according to whether the object was and is assigned to location and passes Predicate (see
// the cacher's convertToWatchEvent); a DELETED for an object that stops matching carries the
// old content at the event's RV. Registration and taking the initial state or reading the
// history are atomic with ingest: no event is lost or sent twice.
//
// Before the store's first sync, Watch waits for it (like the cacher waits until ready). A
// ResourceVersion ahead of the store is answered at once with k8s.io/apiserver's "Too large
// resource version" 504 (storage.NewTooLargeResourceVersionError): the caller waits for it
// first (WaitForResourceVersion) with its own timeout, so that one timeout, the view's
// --freshness-timeout, governs every wait for freshness. A ResourceVersion older than the
// history returns a 410 Expired error "too old resource version: R (oldest)" (kube-apiserver's
// wording; oldest is the lowest RV that can still be resumed from). ctx ending (or Stop, or the
// store closing, or the client falling WatcherBufferSize events behind) ends the watch and
// closes its result channel.
func (s *ResourceStore) Watch(ctx context.Context, location string, opts WatchOptions) (watch.Interface, error) {
	if err := s.waitUntil(ctx, func() bool { return s.synced || s.closed }); err != nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("%s is not synced with the source yet: %v", s.gvr.GroupResource(), err))
	}
	if !opts.InitialEvents && opts.ResourceVersion > 0 {
		// The caller waited (WaitForResourceVersion, with its own timeout) for a
		// resourceVersion ahead of the store; still ahead is kube-apiserver's 504.
		if current := s.ResourceVersion(); opts.ResourceVersion > current {
			return nil, storage.NewTooLargeResourceVersionError(opts.ResourceVersion, current, 1)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, s.closedError()
	}
	init := initialEvents{rv: s.rv}
	if !opts.Part.Whole() {
		init.part = opts.Part
		part, pred := opts.Part, opts.Predicate
		opts.Predicate = func(o *Object) bool { return inPart(part, o) && (pred == nil || pred(o)) }
	}
	li := s.locs[location]
	if opts.InitialEvents {
		init.initial = true
		if li != nil && li.tree.Len() > 0 {
			init.snapshot = li.tree.Clone()
		}
		init.endBookmark = opts.InitialEventsEndBookmark
	} else {
		from := opts.ResourceVersion
		if from == 0 {
			// From now on: nothing to replay.
			from = s.rv
			init.replay = s.history.since(from)
		} else {
			if from < s.history.start {
				return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, s.history.start))
			}
			init.replay = s.history.resumeFrom(from)
			if e := firstDropped(init.replay, location, opts.Predicate); e != nil {
				return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d): the history no longer holds the version of %s before resourceVersion %d, larger than the history keeps",
					from, s.history.start, e.obj.name, e.rv))
			}
		}
		init.replayFrom = from
	}

	w := newWatcher(s, location, opts)
	// Periodic bookmarks start from what the watch is handed: the resume point (the replay
	// may not touch the location at all) or, for initial events, the state's RV only if the
	// end bookmark conveys it.
	switch {
	case !opts.InitialEvents:
		w.lastQueuedRV.Store(init.replayFrom)
	case opts.InitialEventsEndBookmark:
		w.lastQueuedRV.Store(s.rv)
	}
	if li == nil {
		li = s.locationLocked(location)
	}
	w.loc = li
	li.addWatcher(w)
	w.registered = true
	s.metrics.watchers.Inc()
	if w.bookmarks {
		s.addBookmarkWatcherLocked(w)
	}

	w.start(ctx, init)
	return w, nil
}

// unregister removes w from the store (no more events are delivered to it).
func (s *ResourceStore) unregister(w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unregisterLocked(w)
}

// unregisterLocked removes w. Called with s.mu held for writing.
func (s *ResourceStore) unregisterLocked(w *watcher) {
	if !w.registered {
		return
	}
	w.registered = false
	w.loc.removeWatcher(w)
	if w.bookmarks {
		s.removeBookmarkWatcherLocked()
	}
	s.metrics.watchers.Dec()
	s.releaseLocked(w.loc)
}

// firstDropped returns the first event of replay that a watcher of location with predicate
// pred would need and whose content the history dropped (event.needsDropped), nil if none.
func firstDropped(replay []*event, location string, pred func(*Object) bool) *event {
	for _, e := range replay {
		if e.needsDropped(location, pred) {
			return e
		}
	}
	return nil
}
