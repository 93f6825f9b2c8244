package placement

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// DefaultTolerance is how long a location may be not Ready before a Placement moves its
// objects when spec.notReadyTolerance is absent (5 minutes).
const DefaultTolerance = 5 * time.Minute

// Policy is a Placement's spec, compiled.
type Policy struct {
	// Resources are the resources whose objects the Placement places.
	Resources []schema.GroupVersionResource
	// Divide is whether spec.replicas is divided over the chosen locations.
	Divide bool
	// Tolerance is spec.notReadyTolerance or DefaultTolerance.
	Tolerance time.Duration

	objects   labels.Selector
	locations labels.Selector
	names     sets.Set[string]
	n         int
	weights   *controlv1alpha1.PlacementWeights
}

// Compile checks spec and compiles it. Errors say which field is wrong: a resource named with
// "*" or a subresource, a malformed selector, a negative tolerance. The CRD's schema refuses
// most of these already; Compile guards against objects written before it did.
func Compile(spec *controlv1alpha1.PlacementSpec) (*Policy, error) {
	p := &Policy{Divide: spec.Replicas == controlv1alpha1.ReplicasDivide, Tolerance: DefaultTolerance, weights: spec.Weights}
	var err error
	if p.Resources, err = controlv1alpha1.ExactResources(spec.Resources); err != nil {
		return nil, fmt.Errorf("spec.resources: %w", err)
	}
	if p.objects, err = selector(spec.ObjectSelector); err != nil {
		return nil, fmt.Errorf("spec.objectSelector: %w", err)
	}
	if spec.LocationSelector == nil && len(spec.LocationNames) == 0 {
		return nil, fmt.Errorf("spec: set locationSelector or locationNames")
	}
	if p.locations, err = selector(spec.LocationSelector); err != nil {
		return nil, fmt.Errorf("spec.locationSelector: %w", err)
	}
	p.names = sets.New(spec.LocationNames...)
	if spec.NumberOfLocations != nil {
		if *spec.NumberOfLocations < 1 {
			return nil, fmt.Errorf("spec.numberOfLocations: must be at least 1, got %d", *spec.NumberOfLocations)
		}
		p.n = int(*spec.NumberOfLocations)
	}
	if spec.NotReadyTolerance != nil {
		if spec.NotReadyTolerance.Duration < 0 {
			return nil, fmt.Errorf("spec.notReadyTolerance: must not be negative, got %s", spec.NotReadyTolerance.Duration)
		}
		p.Tolerance = spec.NotReadyTolerance.Duration
	}
	return p, nil
}

// selector converts s; nil selects everything.
func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// SelectsObject reports whether an object with these labels is selected.
func (p *Policy) SelectsObject(objectLabels map[string]string) bool {
	return p.objects.Matches(labels.Set(objectLabels))
}

// MatchesLocation reports whether l is one of the Placement's locations (selector and names).
func (p *Policy) MatchesLocation(l Location) bool {
	if p.names.Len() > 0 && !p.names.Has(l.Name) {
		return false
	}
	return p.locations.Matches(labels.Set(l.Labels))
}

// Pool is a Placement's matching locations at one time, sorted by what they may take.
type Pool struct {
	// Evictions are the Placement's evictions after this look: locations moved away from,
	// with when (a new entry is dated now).
	Evictions map[string]time.Time
	// Next is when the pool changes by time alone (a location's tolerance runs out, an
	// evicted location may be re-admitted); zero when never.
	Next time.Time

	matching    []string
	matchingSet sets.Set[string]
	usable      sets.Set[string] // may take new work
	held        sets.Set[string] // evicted: keeps what it has only when nothing can replace it
	weights     map[string]int64
}

// Pool sorts locs at now: a matching location is held when it has been not Ready beyond the
// tolerance (it is then evicted, dated now) or was evicted and has not been Ready since the
// tolerance passed after the eviction (so that work moves at most once per tolerance period
// per location); otherwise it is usable unless unschedulable. evictions are the Placement's
// evictions so far (status.evictions); those of locations that no longer match are dropped.
func (p *Policy) Pool(locs []Location, evictions map[string]time.Time, now time.Time) Pool {
	pool := Pool{Evictions: map[string]time.Time{}, usable: sets.New[string](), held: sets.New[string](), weights: map[string]int64{}}
	later := func(t time.Time) {
		if pool.Next.IsZero() || t.Before(pool.Next) {
			pool.Next = t
		}
	}
	for _, l := range locs {
		if !p.MatchesLocation(l) {
			continue
		}
		pool.matching = append(pool.matching, l.Name)
		pool.weights[l.Name] = l.weight(p.weights)
		failAt := l.FailedAt(p.Tolerance)
		if at, evicted := evictions[l.Name]; evicted {
			readmit := at.Add(p.Tolerance)
			if !l.Ready || now.Before(readmit) {
				pool.Evictions[l.Name] = at
				pool.held.Insert(l.Name)
				if l.Ready {
					later(readmit)
				}
				continue
			}
		} else if !failAt.IsZero() {
			if !now.Before(failAt) {
				pool.Evictions[l.Name] = now
				pool.held.Insert(l.Name)
				continue
			}
			later(failAt)
		}
		if !l.Unschedulable {
			pool.usable.Insert(l.Name)
		}
	}
	slices.Sort(pool.matching)
	pool.matchingSet = sets.New(pool.matching...)
	return pool
}

// Matching returns the names of the matching locations, sorted.
func (pool Pool) Matching() []string { return pool.matching }

// Held returns the names of the held (evicted) locations, sorted.
func (pool Pool) Held() []string { return sets.List(pool.held) }

// Decision is where one object goes.
type Decision struct {
	// Locations are the object's locations, sorted; empty: the object is assigned nowhere.
	Locations []string
	// Replicas are the divided replicas per location (Divide only).
	Replicas map[string]int64
	// Keep says to leave the object's assignment as it is: the object is assigned and no
	// location may take it (Divide: none usable; Duplicate: none matches).
	Keep bool
	// Stuck are held locations the object keeps because no other location can take it.
	Stuck []string
}

// Decide returns where the object with key (resource/namespace/name, with its logical
// cluster in kcp mode) goes. current are the locations this Placement assigned it to before
// (nil for a new object); replicas is its spec.replicas (Divide only).
//
// Duplicate is sticky: the object keeps each current location that still matches and is not
// held (an unschedulable one included), and vacancies up to numberOfLocations are filled from
// the usable locations in rendezvous order; a held location is replaced when a usable one is
// free and kept (Stuck) otherwise. New locations therefore take new objects only, and a
// location that comes back does not take its objects back. Without numberOfLocations every
// usable location is chosen, and held ones are kept (there is nowhere to move to). An object
// for which no location remains (none matches any more) keeps its assignment (Keep): only
// deleting the Placement, or another Placement, takes it away.
//
// Divide re-divides: the chosen locations are the usable ones (the first numberOfLocations in
// rendezvous order), and replicas are divided over them by weight (Divide); locations that get
// 0 are not assigned, except that an object with 0 replicas goes to its first location. When
// no location is usable the current assignment is kept.
func (p *Policy) Decide(key string, current []string, replicas int64, pool Pool) Decision {
	n := p.n
	if n == 0 {
		n = -1
	}
	if p.Divide {
		set := top(scoreAll(key, pool.matching), n, pool.usable.Has)
		if len(set) == 0 {
			if len(current) > 0 {
				return Decision{Keep: true, Stuck: heldOf(current, pool)}
			}
			return Decision{}
		}
		weights := make([]int64, len(set))
		for i, l := range set {
			weights[i] = pool.weights[l]
		}
		parts := Divide(replicas, set, weights)
		d := Decision{Replicas: map[string]int64{}}
		for _, l := range set {
			if parts[l] > 0 {
				d.Locations = append(d.Locations, l)
				d.Replicas[l] = parts[l]
			}
		}
		if len(d.Locations) == 0 {
			d.Locations, d.Replicas[set[0]] = []string{set[0]}, 0
		}
		slices.Sort(d.Locations)
		return d
	}

	cur := sets.New(current...)
	var d Decision
	if p.n > 0 && len(current) == p.n && p.keepsAll(current, pool) {
		// The common case, every reconcile of an unchanged namespace: nothing to rank.
		d.Locations = slices.Sorted(slices.Values(current))
		return d
	}
	if p.n == 0 {
		for _, l := range pool.matching {
			switch {
			case pool.held.Has(l) && cur.Has(l):
				d.Locations = append(d.Locations, l)
				d.Stuck = append(d.Stuck, l)
			case pool.usable.Has(l) || (cur.Has(l) && !pool.held.Has(l)):
				d.Locations = append(d.Locations, l)
			}
		}
		if len(d.Locations) == 0 && len(current) > 0 {
			return Decision{Keep: true}
		}
		return d
	}
	s := scoreAll(key, pool.matching)
	chosen := top(s, p.n, func(l string) bool { return cur.Has(l) && !pool.held.Has(l) })
	kept := sets.New(chosen...)
	chosen = append(chosen, top(s, p.n-len(chosen), func(l string) bool { return pool.usable.Has(l) && !kept.Has(l) })...)
	if len(chosen) < p.n {
		d.Stuck = top(s, p.n-len(chosen), func(l string) bool { return pool.held.Has(l) && cur.Has(l) })
		chosen = append(chosen, d.Stuck...)
	}
	if len(chosen) == 0 && len(current) > 0 {
		return Decision{Keep: true}
	}
	slices.Sort(chosen)
	slices.Sort(d.Stuck)
	d.Locations = chosen
	return d
}

// keepsAll reports whether every location of locs matches and is not held.
func (p *Policy) keepsAll(locs []string, pool Pool) bool {
	for _, l := range locs {
		if !pool.matchingSet.Has(l) || pool.held.Has(l) {
			return false
		}
	}
	return true
}

// heldOf returns the held locations among locs, sorted.
func heldOf(locs []string, pool Pool) []string {
	var out []string
	for _, l := range locs {
		if pool.held.Has(l) {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// ObjectKey is the key an object is ranked by: resource, logical cluster, namespace and name.
func ObjectKey(gr schema.GroupResource, cluster, namespace, name string) string {
	return strings.Join([]string{gr.String(), cluster, namespace, name}, "/")
}
