package cache

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// Periodic bookmarks (WatchOptions.AllowBookmarks) are scheduled per watcher, StoreOptions.
// BookmarkInterval after its start and then after its last bookmark, and sent by one ticker
// per store, as kube-apiserver's cacher does with its watcherBookmarkTimeBuckets: watchers are
// kept in buckets of their due time (bookmarkGranularity wide), and each tick sends the
// bookmarks of the buckets that are due. The ticker runs while at least one watcher that allows
// bookmarks is registered. Watchers so keep the spread of their start times. A ticker that gave
// every watcher its bookmark at once would send them in bursts: with bench scenario 2's 10,000
// watches, opened together, 10,000 bookmarks at once, and the events written meanwhile wait
// behind them.

// bookmarkSchedule is a store's periodic bookmark schedule. Its buckets are guarded by mu, taken
// after the store's mutex; the ticker's lifetime by the store's mutex.
type bookmarkSchedule struct {
	// granularity is the width of a bucket and the ticker's period: a second, or
	// BookmarkInterval when shorter (newBookmarkSchedule).
	granularity time.Duration
	// watchers counts the registered watchers that allow bookmarks; stop, while there are
	// any, stops the ticker.
	watchers int
	stop     chan struct{}

	mu sync.Mutex
	// due holds the watchers by the bucket of their next bookmark's time (UnixNano /
	// granularity). A watcher that ended stays in its bucket until it is due, then is dropped.
	due map[int64][]*watcher
}

// newBookmarkSchedule returns the empty schedule of a store whose watchers get a bookmark every
// interval.
func newBookmarkSchedule(interval time.Duration) bookmarkSchedule {
	return bookmarkSchedule{granularity: min(bookmarkGranularity, interval)}
}

// bookmarkGranularity is the widest bucket of the periodic bookmark schedule (kube-apiserver's
// cacher uses one-second buckets).
const bookmarkGranularity = time.Second

// addBookmarkWatcherLocked schedules w's first periodic bookmark, one interval from now, and
// starts the store's ticker when w is the first watcher that allows bookmarks. Called with
// s.mu held for writing.
func (s *ResourceStore) addBookmarkWatcherLocked(w *watcher) {
	b := &s.bookmarks
	b.watchers++
	if b.watchers == 1 {
		b.stop = make(chan struct{})
		go s.runBookmarks(s.clock.NewTicker(b.granularity), b.stop)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.scheduleLocked(w, s.clock.Now().Add(s.opts.BookmarkInterval))
}

// removeBookmarkWatcherLocked uncounts an unregistered watcher that allows bookmarks (its bucket
// entry is dropped when due), and stops the ticker and empties the schedule after the last.
// Called with s.mu held for writing.
func (s *ResourceStore) removeBookmarkWatcherLocked() {
	b := &s.bookmarks
	b.watchers--
	if b.watchers > 0 {
		return
	}
	close(b.stop)
	b.stop = nil
	b.mu.Lock()
	b.due = nil
	b.mu.Unlock()
}

// scheduleLocked puts w in the bucket of at. Called with b.mu held.
func (b *bookmarkSchedule) scheduleLocked(w *watcher, at time.Time) {
	if b.due == nil {
		b.due = map[int64][]*watcher{}
	}
	k := at.UnixNano() / int64(b.granularity)
	b.due[k] = append(b.due[k], w)
}

// runBookmarks sends the due periodic bookmarks on every tick of t until stop is closed.
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

// sendBookmarks delivers a BOOKMARK at the store's current resourceVersion to every registered
// watcher whose bookmark is due and that was handed only older resourceVersions, and schedules
// its next one an interval later. All of them get the same object. A bookmark is delivered
// behind the events the watcher has (so it never claims an RV whose events the watcher has not
// received), and skipped for a watcher whose consumer lags by WatcherBufferSize events (the
// next event terminates it).
func (s *ResourceStore) sendBookmarks() {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b := &s.bookmarks
	b.mu.Lock()
	defer b.mu.Unlock()
	now := s.clock.Now()
	nowKey := now.UnixNano() / int64(b.granularity)
	var bm *bookmark
	for k, ws := range b.due {
		if k > nowKey {
			continue
		}
		delete(b.due, k)
		for _, w := range ws {
			if !w.registered {
				continue
			}
			b.scheduleLocked(w, now.Add(s.opts.BookmarkInterval))
			if s.rv <= w.lastQueuedRV.Load() {
				continue
			}
			if bm == nil {
				bm = newBookmark(s.gvk, s.rv, false)
			}
			if w.deliver(watch.Event{Type: watch.Bookmark, Object: bm}) {
				w.lastQueuedRV.Store(s.rv)
				s.metrics.bookmarks.Inc()
			}
		}
	}
}
