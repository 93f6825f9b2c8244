package cache

import (
	"sort"
	"sync"
	"time"

	"github.com/google/btree"
)

// snapshot is the content of one location at one resourceVersion: a copy-on-write clone of the
// location's B-tree, which later writes to the live tree never change.
type snapshot struct {
	rv      uint64
	tree    *btree.BTreeG[*Object]
	created time.Time
}

// snapshots keeps recent per-location snapshots so that the pages of a paginated list
// (limit/continue) are all served from the state of the first page, like kube-apiserver's
// watch-cache snapshots serve consistent continue pages.
//
// A snapshot is kept for ttl after it was taken and at most max per location (oldest dropped
// first). Lock order: the store's mutex (read or write) before snapshots.mu.
type snapshots struct {
	mu        sync.Mutex
	byLoc     map[string][]snapshot // per location, ascending rv
	ttl       time.Duration
	max       int
	lastSweep time.Time
}

func newSnapshots(ttl time.Duration, max int) *snapshots {
	return &snapshots{byLoc: map[string][]snapshot{}, ttl: ttl, max: max}
}

// get returns the snapshot of location taken at exactly rv.
func (s *snapshots) get(location string, rv uint64, now time.Time) (*btree.BTreeG[*Object], bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.lastSweep) > s.ttl/2 {
		s.sweepLocked(now)
	}
	list := s.byLoc[location]
	i := sort.Search(len(list), func(i int) bool { return list[i].rv >= rv })
	if i == len(list) || list[i].rv != rv || now.Sub(list[i].created) > s.ttl {
		return nil, false
	}
	return list[i].tree, true
}

// add records the state of location at rv. live is the location's live tree, which must not be
// written concurrently (the caller holds the store's mutex); lastChangeRV is the RV of the last
// change of the location, so that an unchanged location shares the newest snapshot's tree
// instead of cloning again.
func (s *snapshots) add(location string, rv uint64, live *btree.BTreeG[*Object], lastChangeRV uint64, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.lastSweep) > s.ttl/2 {
		s.sweepLocked(now)
	}
	list := s.byLoc[location]
	i := sort.Search(len(list), func(i int) bool { return list[i].rv >= rv })
	if i < len(list) && list[i].rv == rv {
		list[i].created = now
		return
	}
	var tree *btree.BTreeG[*Object]
	if n := len(list); n > 0 && i == n && list[n-1].rv >= lastChangeRV {
		tree = list[n-1].tree // nothing changed since the newest snapshot
	} else {
		tree = live.Clone()
	}
	list = append(list, snapshot{})
	copy(list[i+1:], list[i:])
	list[i] = snapshot{rv: rv, tree: tree, created: now}
	if len(list) > s.max {
		list = append(list[:0:0], list[len(list)-s.max:]...)
	}
	s.byLoc[location] = list
}

// sweepLocked drops expired snapshots of all locations.
func (s *snapshots) sweepLocked(now time.Time) {
	s.lastSweep = now
	for loc, list := range s.byLoc {
		keep := list[:0:0]
		for _, sn := range list {
			if now.Sub(sn.created) <= s.ttl {
				keep = append(keep, sn)
			}
		}
		if len(keep) == 0 {
			delete(s.byLoc, loc)
		} else {
			s.byLoc[loc] = keep
		}
	}
}

// drop drops the snapshots of location (its content changed at the RV they were taken at: a
// re-rendering, ResourceStore.SetRules), so that continuing a list taken before answers 410.
func (s *snapshots) drop(location string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byLoc, location)
}

// reset drops every snapshot.
func (s *snapshots) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byLoc = map[string][]snapshot{}
}
