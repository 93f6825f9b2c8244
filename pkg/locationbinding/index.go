package locationbinding

import (
	"math/bits"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
)

// Location is a registered location as bindings see it: its name and its SyncTarget's labels.
type Location struct {
	// Name is the location name (the SyncTarget's metadata.name).
	Name string
	// Labels are the SyncTarget's labels (read only).
	Labels map[string]string
}

// Index is the immutable answer of every LocationBinding of the source over the registered
// locations, at one time: for each namespace with a binding (per logical cluster), the set of
// locations bound to it. A nil *Index binds every location to every namespace: the Open mode.
//
// The bound locations of a namespace are a bit set over the Index's location names (those of
// the registered locations and of every binding's locationNames), so that Binds costs two map
// lookups and allocates nothing, and an Index of T namespaces and L locations holds T·L bits.
type Index struct {
	// names numbers every location the Index knows, in name order.
	names map[string]int
	// ordered are the names by number.
	ordered []string
	// scopes are the bound locations of each namespace that has a binding.
	scopes map[scope]bitSet
	// bindings are the compiled bindings by key; selected their bound locations.
	bindings map[Key]*Binding
	selected map[Key]bitSet
}

// NewIndex returns the Index of bindings (several of one namespace add up: the union of what
// they bind) over the registered locations. Neither slice is kept; the label maps are (read
// only). Cost: O(bindings × locations) selector matches.
func NewIndex(bindings []*Binding, locations []Location) *Index {
	x := &Index{names: map[string]int{}, scopes: map[scope]bitSet{}, bindings: make(map[Key]*Binding, len(bindings)), selected: make(map[Key]bitSet, len(bindings))}
	registered := make(map[string]labels.Set, len(locations))
	for _, l := range locations {
		registered[l.Name] = labels.Set(l.Labels)
		x.ordered = append(x.ordered, l.Name)
	}
	for _, b := range bindings {
		x.ordered = append(x.ordered, b.names...)
	}
	slices.Sort(x.ordered)
	x.ordered = slices.Compact(x.ordered)
	for i, n := range x.ordered {
		x.names[n] = i
	}
	for _, b := range bindings {
		set := newBitSet(len(x.ordered))
		if b.err == nil {
			for i, n := range x.ordered {
				lbls, ok := registered[n]
				if b.Selects(n, lbls, ok) {
					set.set(i)
				}
			}
		}
		x.bindings[b.Key] = b
		x.selected[b.Key] = set
		sc := scopeOf(b.Key.Cluster, b.Key.Namespace)
		if cur, ok := x.scopes[sc]; ok {
			cur.or(set)
		} else {
			x.scopes[sc] = set.clone()
		}
	}
	return x
}

// Scope is the bound locations of one namespace (Index.Scope). The Scope of a nil Index
// (Open) binds every location.
type Scope struct {
	x     *Index
	bound bitSet
}

// Scope returns the bound locations of namespace in cluster (namespace "" for a cluster-scoped
// object, bound by the LocationBindings of ClusterScopedNamespace). It allocates nothing.
func (x *Index) Scope(cluster, namespace string) Scope {
	if x == nil {
		return Scope{}
	}
	return Scope{x: x, bound: x.scopes[scopeOf(cluster, namespace)]}
}

// Binds reports whether location is bound to the scope's namespace. It allocates nothing.
func (s Scope) Binds(location string) bool {
	if s.x == nil {
		return true
	}
	i, ok := s.x.names[location]
	return ok && s.bound.has(i)
}

// Keep returns the locations of locs (an object's assignment, parsed) bound to the scope's
// namespace, in their order: locs itself when every one is (no copy, no allocation: one
// lookup per location), a new slice otherwise, nil when none is. Every consumer of an
// assignment in the Bound mode reads it through Keep (docs/tenancy.md): the views, the status
// records, the StatusCollectors' rows.
func (s Scope) Keep(locs []string) []string {
	if !slices.ContainsFunc(locs, func(l string) bool { return !s.Binds(l) }) {
		return locs
	}
	var bound []string
	for _, l := range locs {
		if s.Binds(l) {
			bound = append(bound, l)
		}
	}
	return bound
}

// Binds reports whether location is bound to namespace in cluster (Scope(cluster,
// namespace).Binds(location)); always true for a nil Index (Open).
func (x *Index) Binds(cluster, namespace, location string) bool {
	return x.Scope(cluster, namespace).Binds(location)
}

// Bound returns the locations bound to namespace in cluster, sorted; nil for a nil Index
// (Open: every location, which the Index cannot list).
func (x *Index) Bound(cluster, namespace string) []string {
	if x == nil {
		return nil
	}
	return x.namesOf(x.scopes[scopeOf(cluster, namespace)])
}

// Selected returns the locations the binding key selects, sorted, and false when the Index
// holds no such binding.
func (x *Index) Selected(key Key) ([]string, bool) {
	if x == nil {
		return nil, false
	}
	set, ok := x.selected[key]
	if !ok {
		return nil, false
	}
	return x.namesOf(set), true
}

// Binding returns the compiled binding key, nil when the Index holds none.
func (x *Index) Binding(key Key) *Binding {
	if x == nil {
		return nil
	}
	return x.bindings[key]
}

// namesOf returns the names of the locations in set, sorted.
func (x *Index) namesOf(set bitSet) []string {
	var out []string
	set.each(func(i int) { out = append(out, x.ordered[i]) })
	return out
}

// Changes are the namespaces whose bound locations differ between two Indexes (Changed).
type Changes struct {
	all    bool
	scopes map[scope]bool
}

// Changed returns the namespaces whose bound locations differ between old and x, compared
// exactly (as sets of names). Between a nil Index (Open) and a non-nil one, every namespace
// differs. Cost: O((namespaces with a binding in either) × locations).
func (x *Index) Changed(old *Index) Changes {
	switch {
	case x == nil && old == nil:
		return Changes{}
	case x == nil || old == nil:
		return Changes{all: true}
	case x == old:
		return Changes{}
	}
	c := Changes{scopes: map[scope]bool{}}
	// The same locations known to both: their bit sets compare word by word.
	sameNames := slices.Equal(x.ordered, old.ordered)
	for sc, set := range x.scopes {
		if sameNames && slices.Equal(set, old.scopes[sc]) || (sameNames && old.scopes[sc] == nil && set.empty()) {
			continue
		}
		if !slices.Equal(x.namesOf(set), old.namesOf(old.scopes[sc])) {
			c.scopes[sc] = true
		}
	}
	for sc, set := range old.scopes {
		if _, ok := x.scopes[sc]; !ok && !set.empty() {
			c.scopes[sc] = true
		}
	}
	return c
}

// Has reports whether the bound locations of namespace in cluster changed ("" for a
// cluster-scoped object). It allocates nothing.
func (c Changes) Has(cluster, namespace string) bool {
	return c.all || c.scopes[scopeOf(cluster, namespace)]
}

// Any reports whether some namespace's bound locations changed.
func (c Changes) Any() bool { return c.all || len(c.scopes) > 0 }

// bitSet is a set of small non-negative integers.
type bitSet []uint64

// newBitSet returns an empty set for the integers below n.
func newBitSet(n int) bitSet { return make(bitSet, (n+63)/64) }

func (b bitSet) set(i int) { b[i/64] |= 1 << (i % 64) }

func (b bitSet) has(i int) bool { return i/64 < len(b) && b[i/64]&(1<<(i%64)) != 0 }

// or adds o's members to b (both of the same size).
func (b bitSet) or(o bitSet) {
	for i := range b {
		b[i] |= o[i]
	}
}

func (b bitSet) clone() bitSet { return slices.Clone(b) }

func (b bitSet) empty() bool {
	for _, w := range b {
		if w != 0 {
			return false
		}
	}
	return true
}

// each calls fn with every member, in increasing order.
func (b bitSet) each(fn func(int)) {
	for wi, w := range b {
		for w != 0 {
			t := bits.TrailingZeros64(w)
			fn(wi*64 + t)
			w &^= 1 << t
		}
	}
}
