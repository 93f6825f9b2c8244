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
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// DefaultTolerance is how long a location may be not Ready before a Placement moves its
// objects when spec.notReadyTolerance is absent: 5 minutes.
const DefaultTolerance = 5 * time.Minute

// Policy is a Placement's spec, compiled.
type Policy struct {
	// Resources are the resources whose objects the Placement places.
	Resources []schema.GroupVersionResource
	// Divide is whether spec.replicas is divided over the chosen locations.
	Divide bool
	// Tolerance is spec.notReadyTolerance or DefaultTolerance.
	Tolerance time.Duration
	// SpreadByObject is spec.spreadBy: Object: each object is ranked alone (ObjectKey),
	// otherwise everything the Placement selects is one group (GroupKey).
	SpreadByObject bool
	// IgnoreDependencies is spec.dependencies: Ignore.
	IgnoreDependencies bool

	objects   labels.Selector
	locations labels.Selector
	names     sets.Set[string]
	n         int
	weights   *controlv1alpha1.PlacementWeights
}

// Compile checks spec and compiles it. Errors say which field is wrong: a resource named with
// "*" or a subresource, a malformed selector, a negative tolerance, an unknown spreadBy or
// dependencies. The CRD's schema refuses
// most of these already; Compile guards against objects written before it did.
func Compile(spec *controlv1alpha1.PlacementSpec) (*Policy, error) {
	p := &Policy{Divide: spec.Replicas == controlv1alpha1.ReplicasDivide, Tolerance: DefaultTolerance, weights: spec.Weights,
		SpreadByObject:     spec.SpreadBy == controlv1alpha1.SpreadByObject,
		IgnoreDependencies: spec.Dependencies == controlv1alpha1.DependenciesIgnore}
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
	switch spec.SpreadBy {
	case "", controlv1alpha1.SpreadByNamespace, controlv1alpha1.SpreadByObject:
	default:
		return nil, fmt.Errorf("spec.spreadBy: must be %s or %s, got %q", controlv1alpha1.SpreadByNamespace, controlv1alpha1.SpreadByObject, spec.SpreadBy)
	}
	switch spec.Dependencies {
	case "", controlv1alpha1.DependenciesFollow, controlv1alpha1.DependenciesIgnore:
	default:
		return nil, fmt.Errorf("spec.dependencies: must be %s or %s, got %q", controlv1alpha1.DependenciesFollow, controlv1alpha1.DependenciesIgnore, spec.Dependencies)
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

// SelectsObject reports whether an object with these labels is selected. A related copy (an
// object a location's mapper brought up from its target, labelled related.kcp.io/location) is
// never selected: it belongs to that location alone (docs/views.md, "Related copies").
func (p *Policy) SelectsObject(objectLabels map[string]string) bool {
	if _, related := contract.RelatedCopyLocation(objectLabels); related {
		return false
	}
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
	usable      sets.Set[string] // Ready, schedulable and not held: may take new work
	skip        sets.Set[string] // usable ones that take no new work all the same (Without)
	schedulable sets.Set[string] // not unschedulable and not held: may keep divided work
	held        sets.Set[string] // evicted: keeps what it has only when nothing can replace it
	weights     map[string]int64
}

// Pool sorts locs at now: a matching location is held when it has been not Ready beyond the
// tolerance (it is then evicted, dated now) or was evicted and has not been Ready since the
// tolerance passed after the eviction (so that work moves at most once per tolerance period
// per location). A location that is not held and not unschedulable is schedulable, and
// usable (it may take new work) only while it is Ready: a location that has not been Ready
// since it was registered takes nothing, and one that is not Ready within its tolerance keeps
// what it has and takes nothing new. evictions are the Placement's evictions so far
// (status.evictions); those of locations that no longer match are dropped.
func (p *Policy) Pool(locs []Location, evictions map[string]time.Time, now time.Time) Pool {
	pool := Pool{Evictions: map[string]time.Time{}, usable: sets.New[string](), schedulable: sets.New[string](), held: sets.New[string](), weights: map[string]int64{}}
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
			pool.schedulable.Insert(l.Name)
			if l.Ready {
				pool.usable.Insert(l.Name)
			}
		}
	}
	slices.Sort(pool.matching)
	pool.matchingSet = sets.New(pool.matching...)
	return pool
}

// Matching returns the names of the matching locations, sorted.
func (pool Pool) Matching() []string { return pool.matching }

// Without returns the pool with the locations of skip taking no new work: they are no longer
// usable, and keep only what they have, as a location that is not Ready within its tolerance
// does (Choose). It is how a location whose target does not serve a group's resources
// compatibly is kept from taking the group (docs/placement.md, "Compatible locations"):
// never removing an assignment keeps a report that may be wrong or stale from moving work.
// pool is not changed and skip is kept, not copied (the caller must not modify it); an empty
// skip returns pool itself.
func (pool Pool) Without(skip sets.Set[string]) Pool {
	if skip.Len() == 0 {
		return pool
	}
	pool.skip = skip
	return pool
}

// takesNew reports whether location l may take new work: usable and not skipped.
func (pool Pool) takesNew(l string) bool {
	return pool.usable.Has(l) && !pool.skip.Has(l)
}

// Matches reports whether location l matches the Placement.
func (pool Pool) Matches(l string) bool { return pool.matchingSet.Has(l) }

// Held returns the names of the held (evicted) locations, sorted.
func (pool Pool) Held() []string { return sets.List(pool.held) }

// Choice is where one group goes: with spreadBy: Namespace everything a Placement selects,
// with spreadBy: Object one object.
type Choice struct {
	// Locations are the group's locations in rank order (Divide divides over them in this
	// order); empty: nowhere.
	Locations []string
	// Keep says to leave the group's objects assigned as they are: the group is assigned
	// and no location may take it (Divide: none usable; Duplicate: none matches).
	Keep bool
	// Stuck are held locations the group keeps because no other location can take it.
	Stuck []string
}

// Decision is where one object goes.
type Decision struct {
	// Locations are the object's locations, sorted; empty: the object is assigned nowhere.
	Locations []string
	// Replicas are the divided replicas per location (Divide only).
	Replicas map[string]int64
	// Keep says to leave the object's assignment as it is (Choice.Keep).
	Keep bool
	// Stuck are held locations the object keeps because no other location can take it.
	Stuck []string
}

// Choose returns where the group ranked by key (GroupKey, or ObjectKey for an object placed
// alone) goes. current are the locations this Placement assigned the group's objects to
// before, their union (nil for a new group): the group as a whole keeps or leaves each of
// them, so objects that were left on different locations (a move interrupted by a restart)
// end up together, and a group is never split between a held location and a new one.
//
// Duplicate is sticky: the group keeps each current location that still matches and is not
// held (an unschedulable one, or one not Ready within its tolerance, included), and
// vacancies up to numberOfLocations are filled from the usable locations in rendezvous
// order; a held location is replaced when a usable one is free and kept (Stuck) otherwise.
// New locations therefore take new groups only, and a location that comes back does not
// take its groups back. Without numberOfLocations every usable location is chosen, and held
// ones are kept (there is nowhere to move to). A group for which no location remains (none
// matches any more) keeps its assignment (Keep): only deleting the Placement, or another
// Placement, takes it away.
//
// Divide re-chooses: the first numberOfLocations in rendezvous order among the usable
// locations and the group's current ones that are schedulable (a current location that is
// not Ready within its tolerance keeps its part; a new group goes only to Ready ones). So a
// location that ranks higher, once Ready, takes whole groups at once. When no location
// qualifies the current assignment is kept.
func (p *Policy) Choose(key string, current []string, pool Pool) Choice {
	cur := sets.New(current...)
	if p.Divide {
		n := p.n
		if n == 0 {
			n = -1
		}
		set := top(scoreAll(key, pool.matching), n, func(l string) bool {
			return pool.takesNew(l) || (cur.Has(l) && pool.schedulable.Has(l))
		})
		if len(set) == 0 && len(current) > 0 {
			return Choice{Keep: true, Stuck: heldOf(current, pool)}
		}
		return Choice{Locations: set}
	}
	if p.n > 0 && len(current) == p.n && p.keepsAll(current, pool) {
		// The common case, every reconcile of an unchanged namespace: nothing to rank.
		return Choice{Locations: slices.Sorted(slices.Values(current))}
	}
	var c Choice
	if p.n == 0 {
		for _, l := range pool.matching {
			switch {
			case pool.held.Has(l) && cur.Has(l):
				c.Locations = append(c.Locations, l)
				c.Stuck = append(c.Stuck, l)
			case pool.takesNew(l) || (cur.Has(l) && !pool.held.Has(l)):
				c.Locations = append(c.Locations, l)
			}
		}
		if len(c.Locations) == 0 && len(current) > 0 {
			return Choice{Keep: true}
		}
		return c
	}
	s := scoreAll(key, pool.matching)
	chosen := top(s, p.n, func(l string) bool { return cur.Has(l) && !pool.held.Has(l) })
	kept := sets.New(chosen...)
	chosen = append(chosen, top(s, p.n-len(chosen), func(l string) bool { return pool.takesNew(l) && !kept.Has(l) })...)
	if len(chosen) < p.n {
		c.Stuck = top(s, p.n-len(chosen), func(l string) bool { return pool.held.Has(l) && cur.Has(l) })
		chosen = append(chosen, c.Stuck...)
	}
	if len(chosen) == 0 && len(current) > 0 {
		return Choice{Keep: true}
	}
	slices.Sort(c.Stuck)
	c.Locations = chosen
	return c
}

// Split returns where one object of a group goes, given the group's choice c: with Divide,
// its replicas (its spec.replicas) divided over c's locations by weight (Divide); locations
// that get 0 are not assigned, except that an object with 0 replicas goes to the first.
// Otherwise the object goes to every location of c.
func (p *Policy) Split(c Choice, replicas int64, pool Pool) Decision {
	if c.Keep || len(c.Locations) == 0 {
		return Decision{Keep: c.Keep, Stuck: c.Stuck}
	}
	if !p.Divide {
		return Decision{Locations: slices.Sorted(slices.Values(c.Locations)), Stuck: c.Stuck}
	}
	weights := make([]int64, len(c.Locations))
	for i, l := range c.Locations {
		weights[i] = pool.weights[l]
	}
	parts := Divide(replicas, c.Locations, weights)
	d := Decision{Replicas: map[string]int64{}, Stuck: c.Stuck}
	for _, l := range c.Locations {
		if parts[l] > 0 {
			d.Locations = append(d.Locations, l)
			d.Replicas[l] = parts[l]
		}
	}
	if len(d.Locations) == 0 {
		d.Locations, d.Replicas[c.Locations[0]] = []string{c.Locations[0]}, 0
	}
	slices.Sort(d.Locations)
	return d
}

// Decide returns where an object placed alone (spreadBy: Object), ranked by key, goes:
// Choose over its current locations, then Split of its replicas (Divide only).
func (p *Policy) Decide(key string, current []string, replicas int64, pool Pool) Decision {
	return p.Split(p.Choose(key, current, pool), replicas, pool)
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

// ObjectKey is the key an object placed alone (spreadBy: Object) is ranked by: resource,
// logical cluster, namespace and name.
func ObjectKey(gr schema.GroupResource, cluster, namespace, name string) string {
	return strings.Join([]string{gr.String(), cluster, namespace, name}, "/")
}

// GroupKey is the key a group (spreadBy: Namespace) is ranked by: its logical cluster and
// namespace. Placements of one namespace whose locations match alike therefore choose alike
// for a new group: a namespace holding one application lands on one set of locations.
func GroupKey(cluster, namespace string) string {
	return cluster + "/" + namespace
}
