package cache

import (
	"github.com/google/btree"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// ListOptions selects a page of a location's objects for ResourceStore.List.
type ListOptions struct {
	// After is the contract.Key after which the page starts (exclusive); "" starts at the beginning.
	After contract.Key
	// Limit is the maximum number of items in the page; 0 means all.
	Limit int64
	// SnapshotRV, when not 0, serves the page from the location's state at that
	// resourceVersion: the ResourceVersion of the list's first page, carried in the continue
	// token. If that state is no longer available the error is a 410 Expired.
	SnapshotRV uint64
	// Predicate selects objects (label/field selectors, namespace); nil selects all.
	Predicate func(*Object) bool
	// Part, when not the whole location, restricts the list to the objects of a part of it
	// (some logical clusters, a hash shard; contract.ViewPart): only the part's key ranges of
	// the location's B-tree are visited (part.go).
	Part contract.ViewPart
}

// ListResult is one page of a location's objects.
type ListResult struct {
	// Items are the matching objects in contract.Key order (shared, READ-ONLY).
	Items []*Object
	// ResourceVersion is the RV of the state the page shows (the list's resourceVersion).
	ResourceVersion uint64
	// More says whether matching items remain after the last item (the caller then issues a
	// continue token with the last item's contract.Key and ResourceVersion).
	More bool
	// RemainingItemCount is always nil: counting the rest would cost as much as listing it.
	RemainingItemCount *int64
}

// List returns, in contract.Key order, the objects of location that match opts.Predicate, starting
// strictly after opts.After, at most opts.Limit items, the resourceVersion the page reflects,
// and whether more matching items remain. Its cost grows with the location's objects, never
// with the cache total.
//
// Without SnapshotRV the page shows the current state at the store's current RV; when more
// items remain, that state is kept as a snapshot (an O(1) copy-on-write clone of the location's
// B-tree, kept StoreOptions.SnapshotTTL) so the continue pages (SnapshotRV = the page's RV) are
// consistent with the first, like kube-apiserver's paginated lists. With SnapshotRV, the page
// comes from that snapshot, or from the live state if the location has not changed since; if
// neither is possible, List returns apierrors.NewResourceExpired (410 Gone), which the view
// answers like kube-apiserver answers an expired continue token.
//
// Before HasSynced the store is empty (RV 0): views pass WaitUntilSynced first, so an unsynced
// resource is never served as empty; they use WaitForResourceVersion for consistent reads.
func (s *ResourceStore) List(location string, opts ListOptions) (ListResult, error) {
	now := s.clock.Now()
	s.mu.RLock()
	li := s.locs[location]
	rv := s.rv
	var tree *btree.BTreeG[*Object]
	live := true
	if opts.SnapshotRV != 0 {
		rv = opts.SnapshotRV
		if t, ok := s.snaps.get(location, opts.SnapshotRV, now); ok {
			tree, live = t, false
		} else if opts.SnapshotRV > s.rv || (li != nil && (li.lastChangeRV > opts.SnapshotRV || li.rerenderedRV >= opts.SnapshotRV)) || (li == nil && s.freedChangeRV > opts.SnapshotRV) {
			s.mu.RUnlock()
			return ListResult{}, apierrors.NewResourceExpired("the provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
		}
	}
	if live {
		if li != nil {
			tree = li.tree
		}
	} else {
		s.mu.RUnlock()
	}

	items, more := collect(tree, location, opts)
	for i, o := range items {
		items[i] = o.ForLocation(location)
	}
	if live {
		if more {
			s.snaps.add(location, rv, li.tree, li.lastChangeRV, now)
		}
		s.mu.RUnlock()
	}
	return ListResult{Items: items, ResourceVersion: rv, More: more}, nil
}

// collect walks tree, the objects of location, from opts.After and returns up to opts.Limit
// objects whose view matches (Object.selectable), and whether more matching objects follow.
func collect(tree *btree.BTreeG[*Object], location string, opts ListOptions) ([]*Object, bool) {
	if tree == nil {
		return []*Object{}, false
	}
	capHint := tree.Len()
	if opts.Limit > 0 && int64(capHint) > opts.Limit {
		capHint = int(opts.Limit)
	}
	if (opts.Predicate != nil || !opts.Part.Whole()) && capHint > 64 {
		capHint = 64
	}
	items := make([]*Object, 0, capHint)
	more := false
	ascendPart(tree, opts.Part, opts.After, func(o *Object) bool {
		if o.key <= opts.After {
			return true
		}
		if opts.Predicate != nil && !opts.Predicate(o.selectable(location)) {
			return true
		}
		if opts.Limit > 0 && int64(len(items)) >= opts.Limit {
			more = true
			return false
		}
		items = append(items, o)
		return true
	})
	return items, more
}

// clusterPrefix returns the common prefix of the Keys of cluster's objects ("cluster|"); they
// form one contiguous range in Key order.
func clusterPrefix(cluster string) contract.Key { return contract.Key(cluster + "|") }

// Lookup returns location's objects namespace/name (namespace "" for cluster-scoped resources)
// of every logical cluster, in contract.Key order (more than one only when several clusters
// hold the same namespace/name for the location), and the store's current resourceVersion.
// The view answers a GET on its all-clusters path with the only one, or 400 when there are
// several (docs/design.md, "The location view").
func (s *ResourceStore) Lookup(location, namespace, name string) ([]*Object, uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	li := s.locs[location]
	if li == nil {
		return nil, s.rv
	}
	objs := li.lookup(namespace, name)
	out := make([]*Object, len(objs))
	for i, o := range objs {
		out[i] = o.ForLocation(location)
	}
	return out, s.rv
}

// GetInCluster returns location's object namespace/name of the logical cluster cluster, and the
// store's current resourceVersion; ok is false when no such object is assigned to location.
func (s *ResourceStore) GetInCluster(location, cluster, namespace, name string) (obj *Object, rv uint64, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	li := s.locs[location]
	if li == nil {
		return nil, s.rv, false
	}
	if o, ok := li.getKey(contract.NewKey(cluster, namespace, name)); ok {
		return o.ForLocation(location), s.rv, true
	}
	return nil, s.rv, false
}

// Get returns the object namespace/name (namespace "" for cluster-scoped resources) of
// location, and the store's current resourceVersion. If several logical clusters hold the same
// namespace/name for that location, the one with the lowest contract.Key (i.e. the lowest cluster name)
// wins. ok is false when no such object is assigned to location.
func (s *ResourceStore) Get(location, namespace, name string) (obj *Object, rv uint64, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	rv = s.rv
	li := s.locs[location]
	if li == nil {
		return nil, rv, false
	}
	if objs := li.lookup(namespace, name); len(objs) > 0 {
		return objs[0].ForLocation(location), rv, true
	}
	return nil, rv, false
}
