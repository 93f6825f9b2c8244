package mapper

import (
	"sync"
	"time"
)

// outcome is the result of the latest sync of one view object.
type outcome int

const (
	outcomeNone     outcome = iota // not processed yet, or gone
	outcomeMapped                  // the target copy was applied at the object's latest version
	outcomeConflict                // an unmanaged target object is in the way
	outcomeError                   // the apply failed; retried with backoff
	outcomeRefused                 // the view object's identity is not its source's (confirmIdentity)
)

// objectStates keeps the outcome of every view object's latest sync, for the
// mapper_objects_mapped and mapper_conflicts gauges, and since when each dirty object has
// waited, for mapper_sync_lag_seconds. It is safe for concurrent use.
type objectStates struct {
	mu         sync.Mutex
	outcomes   map[itemKey]outcome
	dirtySince map[itemKey]time.Time
	// failedAt is, for an object whose sync failed, the view resourceVersion of its latest
	// failed version (see failed).
	failedAt map[itemKey]string
	// conflicts counts the objects in outcomeConflict per resource (GroupResource string),
	// for the SyncTarget's status.resources (ResourceState.Conflicts).
	conflicts map[string]int
	// applied is what the last apply of each mapped object sent; set forgets an object's on
	// outcomeNone (gone) and outcomeError (its copy may be anything).
	applied *appliedCopies
	metrics locationMetrics
}

func newObjectStates(metrics locationMetrics) *objectStates {
	return &objectStates{outcomes: map[itemKey]outcome{}, dirtySince: map[itemKey]time.Time{}, failedAt: map[itemKey]string{},
		conflicts: map[string]int{}, applied: newAppliedCopies(), metrics: metrics}
}

// failed records that the sync of key failed (outcomeError) at the view object's
// resourceVersion rv, and reports whether it is the first failure at that version since the
// object was last in sync: the mapper logs that one at the default verbosity, and its
// retries with backoff only at higher verbosity.
func (s *objectStates) failed(key itemKey, rv string) (first bool) {
	s.set(key, outcomeError)
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.failedAt[key]; ok && prev == rv {
		return false
	}
	s.failedAt[key] = rv
	return true
}

// dirty records that key changed in the view now, unless it is already waiting.
func (s *objectStates) dirty(key itemKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.dirtySince[key]; !ok {
		s.dirtySince[key] = time.Now()
	}
}

// set records the outcome of a sync of key. outcomeNone means the object is gone from the
// view and its target copy is gone too. On outcomeMapped and outcomeNone the object is in
// sync and its lag is observed. It returns the previous outcome.
func (s *objectStates) set(key itemKey, o outcome) outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	resource := key.GVR.GroupResource().String()
	prev := s.outcomes[key]
	if prev != o {
		if prev == outcomeMapped {
			s.metrics.objectsMapped(resource).Dec()
		}
		if prev == outcomeConflict {
			s.metrics.conflictsCurrent(resource).Dec()
			if s.conflicts[resource]--; s.conflicts[resource] <= 0 {
				delete(s.conflicts, resource)
			}
		}
		if o == outcomeMapped {
			s.metrics.objectsMapped(resource).Inc()
		}
		if o == outcomeConflict {
			s.conflicts[resource]++
			s.metrics.conflictsCurrent(resource).Inc()
			s.metrics.conflictsTotal(resource).Inc()
		}
	}
	if o == outcomeNone || o == outcomeError {
		s.applied.forget(key)
	}
	if o == outcomeNone {
		delete(s.outcomes, key)
	} else {
		s.outcomes[key] = o
	}
	if o == outcomeMapped || o == outcomeNone {
		delete(s.failedAt, key)
		if since, ok := s.dirtySince[key]; ok {
			s.metrics.syncLag(resource).Observe(time.Since(since).Seconds())
			delete(s.dirtySince, key)
		}
	}
	return prev
}

// conflictCount returns how many objects of resource (GroupResource string) are in conflict.
func (s *objectStates) conflictCount(resource string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conflicts[resource]
}

// counts returns how many objects of resource gvr (as GroupResource string) have each
// outcome, for progress logs.
func (s *objectStates) counts(resource string) map[outcome]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[outcome]int{}
	for k, o := range s.outcomes {
		if k.GVR.GroupResource().String() == resource {
			out[o]++
		}
	}
	return out
}
