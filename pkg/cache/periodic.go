package cache

import (
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// Periodic bookmarks (WatchOptions.AllowBookmarks) come from one ticker per store, with period
// StoreOptions.BookmarkInterval, which runs while at least one watcher that allows them is
// registered. On each tick every such watcher that has not been handed the store's
// resourceVersion yet gets a BOOKMARK at it, all of them the same object, so it is encoded once
// per encoder. kube-apiserver's cacher likewise drives the bookmarks of all its watchers from
// one timer (its watcherBookmarkTimeBuckets) rather than a ticker per watcher. A watcher so
// gets its first bookmark within one interval of its start, and then one per interval while
// the store moves on.

// addBookmarkWatcherLocked counts a registered watcher that allows bookmarks, and starts the
// store's ticker when it is the first. Called with s.mu held for writing.
func (s *ResourceStore) addBookmarkWatcherLocked() {
	s.bookmarkWatchers++
	if s.bookmarkWatchers == 1 {
		s.bookmarkStop = make(chan struct{})
		go s.runBookmarks(s.clock.NewTicker(s.opts.BookmarkInterval), s.bookmarkStop)
	}
}

// removeBookmarkWatcherLocked uncounts an unregistered watcher that allows bookmarks, and
// stops the ticker after the last. Called with s.mu held for writing.
func (s *ResourceStore) removeBookmarkWatcherLocked() {
	s.bookmarkWatchers--
	if s.bookmarkWatchers == 0 {
		close(s.bookmarkStop)
		s.bookmarkStop = nil
	}
}

// runBookmarks sends periodic bookmarks on every tick of t until stop is closed.
func (s *ResourceStore) runBookmarks(t clock.Ticker, stop <-chan struct{}) {
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C():
			s.sendBookmarks()
		}
	}
}

// sendBookmarks delivers a BOOKMARK at the store's current resourceVersion to every watcher
// that allows bookmarks and was handed only older ones. It is delivered behind the events the
// watcher has (so a bookmark never claims an RV whose events the watcher has not received),
// and skipped for a watcher whose consumer lags by WatcherBufferSize events (the next event
// terminates it).
func (s *ResourceStore) sendBookmarks() {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var b *bookmark
	for _, li := range s.locs {
		for _, w := range li.watchers {
			if !w.bookmarks || s.rv <= w.lastQueuedRV.Load() {
				continue
			}
			if b == nil {
				b = newBookmark(s.gvk, s.rv, false)
			}
			if w.deliver(watch.Event{Type: watch.Bookmark, Object: b}) {
				w.lastQueuedRV.Store(s.rv)
				s.metrics.bookmarks.Inc()
			}
		}
	}
}
