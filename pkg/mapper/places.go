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
	// claims are, for the resources whose ResourceMapping names the copies (spec.naming), the
	// view objects that want each place (claim), and claimed the place of each such object:
	// with a naming, objects of one cluster and namespace can share a place, and when none of
	// them has a copy there the lowest key takes it (winner).
	claims  map[targetPlace]sets.Set[itemKey]
	claimed map[itemKey]targetPlace
}

// placeLock is the mutex of one place, with the number of syncs holding or waiting for it
// (the entry is dropped at zero).
type placeLock struct {
	mu   sync.Mutex
	refs int
}

func newPlaces() *places {
	return &places{locks: map[targetPlace]*placeLock{}, waiting: map[targetPlace]sets.Set[itemKey]{},
		claims: map[targetPlace]sets.Set[itemKey]{}, claimed: map[itemKey]targetPlace{}}
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

// claim records that the view object of key wants place (its latest version maps there),
// and drops its claim of another place. It returns the place it claimed before when that
// changed (so that the objects waiting for it are retried), else the zero place.
func (p *places) claim(place targetPlace, key itemKey) (left targetPlace, changed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev, had := p.claimed[key]
	if had && prev == place {
		return targetPlace{}, false
	}
	if had {
		p.dropClaimLocked(prev, key)
	}
	if p.claims[place] == nil {
		p.claims[place] = sets.New[itemKey]()
	}
	p.claims[place].Insert(key)
	p.claimed[key] = place
	return prev, had
}

// unclaim drops the claim of key (its object left the view, or no longer wants a copy) and
// returns the place it claimed.
func (p *places) unclaim(key itemKey) (left targetPlace, had bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev, had := p.claimed[key]
	if had {
		p.dropClaimLocked(prev, key)
	}
	return prev, had
}

// dropClaims drops every claim of view resource gvr (it stopped; a new informer claims
// again).
func (p *places) dropClaims(gvr schema.GroupVersionResource) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, place := range p.claimed {
		if key.GVR == gvr {
			p.dropClaimLocked(place, key)
		}
	}
}

func (p *places) dropClaimLocked(place targetPlace, key itemKey) {
	delete(p.claimed, key)
	if s := p.claims[place]; s != nil {
		s.Delete(key)
		if s.Len() == 0 {
			delete(p.claims, place)
		}
	}
}

// winner returns the claim of place with the lowest key (contract.Key order of its source:
// cluster, then namespace, then name), and whether place has any claim. An object whose
// copy holds the place keeps it whatever the keys (the caller checks that first); the winner
// decides only between objects none of which has a copy there (docs/resourcemapping.md,
// "Names").
func (p *places) winner(place targetPlace) (itemKey, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var best itemKey
	found := false
	for k := range p.claims[place] {
		if !found || k.source().String() < best.source().String() {
			best, found = k, true
		}
	}
	return best, found
}
