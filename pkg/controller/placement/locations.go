package placement

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/cluster-mapper/cluster-mapper/pkg/placement"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
)

// Locations are the SyncTargets of an informer as placement reads them (placement.Location),
// converted once per SyncTarget and resourceVersion and listed once per change of what
// placement reads. The placement and dependency controllers read every location in each
// round of a namespace; converting 1,000 SyncTargets each time (reflection over their status)
// cost more than deciding (bench scenario 10), and the heartbeats' status writes (1,000
// locations, every minute each) change nothing placement reads. Safe for concurrent use.
type Locations struct {
	store toolscache.Store

	mu sync.Mutex
	// changes counts the events that changed what placement reads (added, deleted, Input
	// changed); List lists again only when it moved.
	changes uint64
	// converted are the SyncTargets converted, by name.
	converted map[string]convertedLocation
	// list and byName are the locations as of changes == listedAt; nil before the first List.
	list     []placement.Location
	byName   map[string]placement.Location
	listedAt uint64
}

// convertedLocation is a SyncTarget converted at one resourceVersion.
type convertedLocation struct {
	resourceVersion string
	location        placement.Location
	input           string
}

// NewLocations returns the Locations of targets, a SyncTarget informer storing
// *unstructured.Unstructured, and adds its event handler: onChange (optional) is called, after
// the count of changes moved, with the old and the new location of each event that changes
// what placement reads (old is nil for an add, new is nil for a delete). The informer stores
// an object before it calls its handlers and onChange runs after the count moved, so a round
// queued by onChange never reads a list older than the event.
func NewLocations(targets toolscache.SharedIndexInformer, onChange func(old, new *placement.Location)) *Locations {
	l := &Locations{store: targets.GetStore(), converted: map[string]convertedLocation{}}
	changed := func(old, new *placement.Location) {
		l.mu.Lock()
		l.changes++
		l.mu.Unlock()
		if onChange != nil {
			onChange(old, new)
		}
	}
	_, _ = targets.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if loc, _, ok := l.of(obj); ok {
				changed(nil, &loc)
			}
		},
		UpdateFunc: func(oldObj, obj interface{}) {
			old, oldInput, okOld := l.convert(oldObj, false)
			loc, input, ok := l.of(obj)
			if okOld && ok && oldInput == input {
				return
			}
			switch {
			case okOld && ok:
				changed(&old, &loc)
			case ok:
				changed(nil, &loc)
			case okOld:
				changed(&old, nil)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if loc, _, ok := l.of(obj); ok {
				changed(&loc, nil)
			}
		},
	})
	return l
}

// of returns obj, a SyncTarget, converted, and what placement reads of it as a comparable
// string (input); false when obj is not a SyncTarget that converts. The conversion is kept
// for the object's resourceVersion.
func (l *Locations) of(obj interface{}) (placement.Location, string, bool) {
	return l.convert(obj, true)
}

// convert is of; keep says whether a new conversion replaces the one kept for the object's
// name: not for the old object of an update, which is older than what the store holds.
func (l *Locations) convert(obj interface{}, keep bool) (placement.Location, string, bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return placement.Location{}, "", false
	}
	l.mu.Lock()
	cached, ok := l.converted[u.GetName()]
	l.mu.Unlock()
	if ok && cached.resourceVersion == u.GetResourceVersion() {
		return cached.location, cached.input, true
	}
	st, err := synctarget.FromUnstructured(u)
	if err != nil {
		return placement.Location{}, "", false
	}
	loc := placement.LocationOf(st)
	cached = convertedLocation{resourceVersion: u.GetResourceVersion(), location: loc,
		input: fmt.Sprint(loc.Name, loc.Labels, loc.Unschedulable, loc.Ready, loc.Since.Unix(), st.Status.Capacity, sets.List(loc.Resources))}
	if keep {
		l.mu.Lock()
		l.converted[u.GetName()] = cached
		l.mu.Unlock()
	}
	return loc, cached.input, true
}

// List returns every SyncTarget of the store as a placement.Location, in the store's order;
// callers must not modify the slice. It lists again only after an event changed what
// placement reads.
func (l *Locations) List() []placement.Location {
	l.listLocked()
	defer l.mu.Unlock()
	return l.list
}

// ByName returns the locations of List by name; callers must not modify the map.
func (l *Locations) ByName() map[string]placement.Location {
	l.listLocked()
	defer l.mu.Unlock()
	return l.byName
}

// listLocked brings list and byName up to date and returns with l.mu held.
func (l *Locations) listLocked() {
	l.mu.Lock()
	if l.list != nil && l.listedAt == l.changes {
		return
	}
	at := l.changes
	l.mu.Unlock()
	// Listed after the count was read: the list is at least as new as the count.
	objs := l.store.List()
	list := make([]placement.Location, 0, len(objs))
	byName := make(map[string]placement.Location, len(objs))
	names := sets.New[string]()
	for _, obj := range objs {
		loc, _, ok := l.of(obj)
		if !ok {
			continue
		}
		list = append(list, loc)
		byName[loc.Name] = loc
		names.Insert(loc.Name)
	}
	l.mu.Lock()
	for name := range l.converted {
		if !names.Has(name) {
			delete(l.converted, name)
		}
	}
	l.list, l.byName, l.listedAt = list, byName, at
}
