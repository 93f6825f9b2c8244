package cache

import (
	"k8s.io/apimachinery/pkg/watch"
)

// deliver hands e to the watcher's consumer without blocking. While nothing waits before it,
// e goes straight into the result channel when the channel has room and e needs no rendering
// for the location; otherwise it waits in pending, and the pump goroutine (started when not
// running) sends it in order. It reports false, without queueing e, when WatcherBufferSize
// events already wait, in pending and in the result channel's buffer together: the consumer does not keep up, and the caller terminates the watch. An
// ended watch drops e and reports true.
//
// Called by the store with its mutex held (for writing by the dispatcher, for reading by the
// periodic bookmarks), so events are delivered in resourceVersion order.
func (w *watcher) deliver(e watch.Event) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return true
	}
	if !w.pumping { // then nothing waits in pending
		if ready, ok := w.rendered(e); ok {
			select {
			case w.result <- ready:
				return true
			default:
			}
		}
	}
	if len(w.pending)+len(w.result) >= w.limit {
		return false
	}
	w.pending = append(w.pending, e)
	if !w.pumping {
		w.pumping = true
		go w.pump(nil)
	}
	return true
}

// rendered returns e as the location sees it when that costs nothing (the object is the same
// for every location, or its view for the location was rendered before); ok false when it
// must be rendered, which the pump does outside the store's lock.
func (w *watcher) rendered(e watch.Event) (watch.Event, bool) {
	o, isObject := e.Object.(*Object)
	if !isObject {
		return e, true
	}
	v, ok := o.renderedFor(w.location)
	if !ok {
		return e, false
	}
	e.Object = v
	return e, true
}

// pump is the goroutine that sends for the watcher while the consumer may block: the initial
// events first (when init is not nil), then the pending events, in order, until none is left
// (later events then go straight to the result channel again) or the watch ended.
func (w *watcher) pump(init *initialEvents) {
	if init != nil && !w.sendInitial(init) {
		w.pumpEnded()
		return
	}
	for {
		w.mu.Lock()
		batch := w.pending
		w.pending = nil
		if len(batch) == 0 || w.stopped {
			w.pumping = false
			w.closeIfStoppedLocked()
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		for _, e := range batch {
			if !w.send(e) {
				w.pumpEnded()
				return
			}
		}
	}
}

// pumpEnded is the pump's exit once the watch ended: the result channel closes, now or, if
// the stop is still under way, in deliveryStopped.
func (w *watcher) pumpEnded() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pumping = false
	w.pending = nil
	w.closeIfStoppedLocked()
}

// deliveryStopped records that the watch ended: waiting events are dropped, the context's
// AfterFunc is released, and the result channel closes unless the pump runs (it closes it on
// its way out).
func (w *watcher) deliveryStopped() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.pending = nil
	if w.stopContext != nil {
		w.stopContext()
	}
	w.closeIfStoppedLocked()
}

// closeIfStoppedLocked closes the result channel once: when the watch ended and no pump can
// send to it any more. Called with w.mu held.
func (w *watcher) closeIfStoppedLocked() {
	if w.stopped && !w.pumping && !w.closed {
		w.closed = true
		close(w.result)
	}
}

// send hands ev, rendered for the location, to the consumer, waiting until it takes it; false
// when the watch ended meanwhile. Only the pump calls it.
func (w *watcher) send(ev watch.Event) bool {
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
	}
}
