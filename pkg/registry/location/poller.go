package location

import (
	"context"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper"
)

// pollInterval is how often the location statistics are recomputed for watches.
const pollInterval = time.Second

// watcherBuffer is how many location events a watcher may fall behind before it is closed.
const watcherBuffer = 256

// poller turns the cache's location statistics, which change with every source event, into a
// resourceVersioned sequence of Location states: every interval it recomputes them, and when
// anything changed it bumps its resourceVersion and sends the differences to the watchers.
// Location counts are informational (kubectl get locations -w), so a second's delay is fine
// and the cost is O(locations) per second, independent of the event rate.
type poller struct {
	// locations computes the current Locations by name, new objects on every call.
	locations func() map[string]*mapper.Location

	mu       sync.Mutex
	rv       uint64
	items    map[string]*mapper.Location
	watchers map[*locationWatcher]struct{}
	started  bool
	cancel   context.CancelFunc
}

func newPoller(locations func() map[string]*mapper.Location) *poller {
	return &poller{locations: locations, items: map[string]*mapper.Location{}, watchers: map[*locationWatcher]struct{}{}}
}

// current returns the locations sorted by name and their resourceVersion, refreshing first.
func (p *poller) current() ([]*mapper.Location, uint64) {
	p.refresh()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sortedLocked(), p.rv
}

func (p *poller) sortedLocked() []*mapper.Location {
	out := make([]*mapper.Location, 0, len(p.items))
	for _, l := range p.items {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// get returns the location name, refreshing first.
func (p *poller) get(name string) (*mapper.Location, bool) {
	p.refresh()
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.items[name]
	return l, ok
}

// refresh recomputes the locations and, if they changed, records a new resourceVersion and
// sends the changes to the watchers.
func (p *poller) refresh() {
	next := p.locations()
	p.mu.Lock()
	defer p.mu.Unlock()
	var events []watch.Event
	for name, l := range next {
		old, ok := p.items[name]
		switch {
		case !ok:
			events = append(events, watch.Event{Type: watch.Added, Object: l})
		case !sameLocation(old, l):
			events = append(events, watch.Event{Type: watch.Modified, Object: l})
		default:
			// Unchanged: keep the object already served. It is never written again, since
			// lists and watches may be encoding it (a copy takes the new resourceVersion).
			next[name] = old
		}
	}
	for name, old := range p.items {
		if _, ok := next[name]; !ok {
			events = append(events, watch.Event{Type: watch.Deleted, Object: old})
		}
	}
	if len(events) == 0 && p.rv != 0 {
		return
	}
	p.rv++
	rv := strconv.FormatUint(p.rv, 10)
	for name, l := range next {
		if l.ResourceVersion != "" {
			c := *l
			l = &c
			next[name] = l
		}
		l.ResourceVersion = rv
	}
	p.items = next
	for w := range p.watchers {
		for _, e := range events {
			if !w.send(e) {
				delete(p.watchers, w)
				break
			}
		}
	}
}

// sameLocation reports whether a and b differ only in resourceVersion.
func sameLocation(a, b *mapper.Location) bool {
	return reflect.DeepEqual(a.Labels, b.Labels) && a.CreationTimestamp.Equal(&b.CreationTimestamp) && reflect.DeepEqual(a.Status, b.Status)
}

// watch registers a watcher. A resourceVersion equal to the current one resumes without
// initial events; "", "0" or an older one starts with ADDED for every matching location. With
// sendInitialEvents (a watch-list request, KEP-3157, which client-go's informers make) it
// starts with ADDED for every matching location whatever the resourceVersion, then a BOOKMARK
// at the current resourceVersion annotated k8s.io/initial-events-end, as kube-apiserver does;
// without that bookmark an informer never syncs.
func (p *poller) watch(ctx context.Context, resourceVersion string, sendInitialEvents bool, match func(*mapper.Location) bool) (watch.Interface, error) {
	if resourceVersion != "" && resourceVersion != "0" {
		if _, err := strconv.ParseUint(resourceVersion, 10, 64); err != nil {
			return nil, apierrors.NewBadRequest("invalid resourceVersion " + strconv.Quote(resourceVersion))
		}
	}
	p.refresh()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started {
		p.started = true
		pctx, cancel := context.WithCancel(context.Background())
		p.cancel = cancel
		go p.loop(pctx)
	}
	w := &locationWatcher{result: make(chan watch.Event, watcherBuffer), done: make(chan struct{}), match: match}
	current := strconv.FormatUint(p.rv, 10)
	if sendInitialEvents || resourceVersion != current {
		for _, l := range p.sortedLocked() {
			w.send(watch.Event{Type: watch.Added, Object: l})
		}
	}
	if sendInitialEvents {
		w.send(watch.Event{Type: watch.Bookmark, Object: &mapper.Location{ObjectMeta: metav1.ObjectMeta{
			ResourceVersion: current, Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}})
	}
	p.watchers[w] = struct{}{}
	go func() {
		select {
		case <-ctx.Done():
		case <-w.done:
		}
		// Events are only sent under p.mu, so closing the channel under it cannot race a send.
		p.mu.Lock()
		delete(p.watchers, w)
		w.Stop()
		close(w.result)
		p.mu.Unlock()
	}()
	return w, nil
}

func (p *poller) loop(ctx context.Context) {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.refresh()
		}
	}
}

func (p *poller) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel != nil {
		p.cancel()
	}
	for w := range p.watchers {
		w.Stop()
	}
	p.watchers = map[*locationWatcher]struct{}{}
}

// locationWatcher is one watch on locations; it is fed under the poller's lock.
type locationWatcher struct {
	result chan watch.Event
	done   chan struct{}
	once   sync.Once
	match  func(*mapper.Location) bool
}

// send delivers e if it matches; false when the watcher is stopped or too far behind (it is
// then stopped and its client re-watches).
func (w *locationWatcher) send(e watch.Event) bool {
	if e.Type != watch.Bookmark && !w.match(e.Object.(*mapper.Location)) {
		return true
	}
	select {
	case <-w.done:
		return false
	default:
	}
	select {
	case w.result <- e:
		return true
	default:
		w.Stop()
		return false
	}
}

// ResultChan returns the events.
func (w *locationWatcher) ResultChan() <-chan watch.Event { return w.result }

// Stop ends the watch; safe to call more than once.
func (w *locationWatcher) Stop() {
	w.once.Do(func() {
		close(w.done)
	})
}
