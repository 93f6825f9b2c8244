package mapper

import (
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// targetPlace is where a copy lands on the target: resource, target namespace ("" for
// cluster-scoped resources) and name. Two source objects have the same place when their
// names are equal and the namespace mapping puts them in one namespace (two logical clusters'
// ns/name under NamespaceMappingSame, or cluster-scoped objects of two clusters).
type targetPlace struct {
	GVR       schema.GroupVersionResource
	Namespace string
	Name      string
}

// places serializes the syncs of source objects that share a target place, so that two of
// them never both find the place free and overwrite each other's copy: the first one mapped
// keeps the place and every other is a conflict (reportConflict), never a flap between two
// objects. It also remembers which objects wait in conflict for a place, so that they are
// retried as soon as the place is freed rather than after their backoff. It is safe for
// concurrent use.
type places struct {
	mu      sync.Mutex
	locks   map[targetPlace]*placeLock
	waiting map[targetPlace]sets.Set[itemKey]
}

// placeLock is the mutex of one place, with the number of syncs holding or waiting for it
// (the entry is dropped at zero).
type placeLock struct {
	mu   sync.Mutex
	refs int
}

func newPlaces() *places {
	return &places{locks: map[targetPlace]*placeLock{}, waiting: map[targetPlace]sets.Set[itemKey]{}}
}

// lock blocks until no other sync holds place and returns the function that releases it.
func (p *places) lock(place targetPlace) (unlock func()) {
	p.mu.Lock()
	l := p.locks[place]
	if l == nil {
		l = &placeLock{}
		p.locks[place] = l
	}
	l.refs++
	p.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		p.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(p.locks, place)
		}
		p.mu.Unlock()
	}
}

// wait records that key is in conflict for place.
func (p *places) wait(place targetPlace, key itemKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting[place] == nil {
		p.waiting[place] = sets.New[itemKey]()
	}
	p.waiting[place].Insert(key)
}

// done records that key no longer waits for place (it was mapped, or left the view).
func (p *places) done(place targetPlace, key itemKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.waiting[place]; s != nil {
		s.Delete(key)
		if s.Len() == 0 {
			delete(p.waiting, place)
		}
	}
}

// freed returns (and forgets) the keys waiting for place, sorted for a stable order.
func (p *places) freed(place targetPlace) []itemKey {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.waiting[place]
	delete(p.waiting, place)
	if s == nil {
		return nil
	}
	out := s.UnsortedList()
	sortItemKeys(out)
	return out
}

// sortItemKeys sorts keys by their source's String.
func sortItemKeys(keys []itemKey) {
	sort.Slice(keys, func(i, j int) bool { return keys[i].source().String() < keys[j].source().String() })
}
