package cache

import (
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
)

// applyLocked applies one event: the object map, the location indexes, the history (when
// record is set and the event touches a location) and the fan-out to watchers. Called with
// s.mu held for writing, so the whole event is atomic for readers and for watch registration.
//
// The cost is O(locations of the old and new object version + watchers of those locations):
// the old and new sorted location lists are merged, and only the watchers registered with
// each of those locations are visited. A location whose view the event does not change (it
// changed only what the location cannot see, see setVisibility) gets no event.
func (s *ResourceStore) applyLocked(ev *event, record bool) {
	var oldLocs, newLocs []string
	if ev.prev != nil {
		oldLocs = ev.prev.locations
	}
	delete(s.failingObjects, ev.obj.key)
	if ev.typ == watch.Deleted {
		delete(s.objects, ev.obj.key)
		if uid := ev.obj.uid; s.opts.ClusterFromAnnotation && uid != "" && s.byUID[uid] == ev.obj.key {
			delete(s.byUID, uid)
		}
		s.metrics.objects.Dec()
	} else {
		if ev.prev == nil {
			s.metrics.objects.Inc()
		}
		s.objects[ev.obj.key] = ev.obj
		if uid := ev.obj.uid; s.opts.ClusterFromAnnotation && uid != "" {
			s.byUID[uid] = ev.obj.key
		}
		if len(ev.obj.failed) > 0 {
			s.failingObjects[ev.obj.key] = ev.obj
		}
		newLocs = ev.obj.locations
	}

	var counts dispatchCounts
	i, j := 0, 0
	for i < len(oldLocs) || j < len(newLocs) {
		var loc string
		var inOld, inNew bool
		switch {
		case j == len(newLocs) || (i < len(oldLocs) && oldLocs[i] < newLocs[j]):
			loc, inOld = oldLocs[i], true
			i++
		case i == len(oldLocs) || newLocs[j] < oldLocs[i]:
			loc, inNew = newLocs[j], true
			j++
		default:
			loc, inOld, inNew = oldLocs[i], true, true
			i++
			j++
		}
		li := s.locationLocked(loc)
		var pending int
		switch {
		case inOld && inNew:
			pending = li.replace(ev.prev, ev.obj)
		case inNew:
			pending = li.insert(ev.obj)
		default:
			pending = li.remove(ev.prev)
		}
		if pending != 0 {
			s.pendingChangedLocked(loc, pending, ev.obj)
		}
		li.lastChangeRV = ev.rv
		if ev.rerendered[loc] {
			li.rerenderedRV = ev.rv
		}
		if len(li.watchers) > 0 && ev.changesView(loc, inOld, inNew) {
			s.dispatchLocked(li, ev, inOld, inNew, &counts)
		}
		if !inNew {
			s.releaseLocked(li)
		}
	}
	s.metrics.recordDispatch(counts)

	if record && (len(oldLocs) > 0 || len(newLocs) > 0) {
		s.history.add(ev, s.clock.Now())
	}
	if ev.rv > s.rv {
		s.rv = ev.rv
	}
}

// dispatchLocked delivers ev to the watchers of one location. It never blocks: a watcher whose
// buffer is full is terminated (its client re-watches from its last resourceVersion and gets
// the missed events from the history), like the cacher's cacheWatcher does when its input
// channel is full.
func (s *ResourceStore) dispatchLocked(li *locationIndex, ev *event, inOld, inNew bool, counts *dispatchCounts) {
	var slow []*watcher
	for _, w := range li.watchers {
		e, ok := ev.forWatcher(li.name, inOld, inNew, w.pred)
		if !ok {
			continue
		}
		if !w.deliver(e) {
			slow = append(slow, w)
			continue
		}
		w.lastQueuedRV.Store(ev.rv)
		counts.count(e.Type)
	}
	for _, w := range slow {
		klog.V(2).InfoS("Closing a watch that does not keep up", "resource", s.gvr.GroupResource().String(),
			"location", li.name, "bufferSize", w.limit)
		s.metrics.slowClosed.Inc()
		w.signalStop()
		s.unregisterLocked(w)
	}
}
