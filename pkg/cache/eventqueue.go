package cache

import (
	"sync"

	"k8s.io/apimachinery/pkg/watch"
)

// eventQueue is a watcher's bounded input buffer: the dispatcher appends events without ever
// blocking, and the watcher goroutine takes all that is queued at once. It plays the part of the
// cacher's buffered input channel, with one difference: it holds memory in proportion to what
// is queued, not to its bound. A channel of StoreOptions.WatcherBufferSize (1000) events holds
// 32 KiB per watch from the start; an idle watch's queue holds none (issue 12 target 4: RSS
// per idle watch ≤ 16 KiB at 10,000 watches).
type eventQueue struct {
	limit int
	// ready holds a signal (capacity 1) when events were queued since the last take.
	ready chan struct{}

	mu     sync.Mutex
	events []watch.Event
}

// newEventQueue returns an empty queue that holds at most limit events.
func newEventQueue(limit int) *eventQueue {
	return &eventQueue{limit: limit, ready: make(chan struct{}, 1)}
}

// push queues e and reports true, or reports false without queueing it when the queue already
// holds limit events (its watcher does not keep up).
func (q *eventQueue) push(e watch.Event) bool {
	q.mu.Lock()
	if len(q.events) >= q.limit {
		q.mu.Unlock()
		return false
	}
	q.events = append(q.events, e)
	first := len(q.events) == 1
	q.mu.Unlock()
	if first {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
	return true
}

// take removes and returns every queued event, in the order they were pushed (nil when none).
func (q *eventQueue) take() []watch.Event {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.events
	q.events = nil
	return out
}
