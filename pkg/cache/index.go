package cache

import (
	"sort"
	"time"

	"github.com/google/btree"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// btreeDegree is the degree of the per-location B-trees (google/btree recommends small tens).
const btreeDegree = 32

// objectLess orders Objects by contract.Key, the order of List pages.
func objectLess(a, b *Object) bool { return a.key < b.key }

// newObjectTree returns an empty per-location B-tree ordered by contract.Key.
func newObjectTree() *btree.BTreeG[*Object] { return btree.NewG(btreeDegree, objectLess) }

// clusterNamespace is a namespace of one logical cluster.
type clusterNamespace struct{ cluster, namespace string }

// locationIndex is everything a ResourceStore keeps about one location: the location's
// objects ordered by contract.Key, per-namespace and per-cluster counts, and the watchers of
// the location. It is guarded by the store's mutex.
type locationIndex struct {
	name string

	// tree holds the location's objects ordered by contract.Key. Cloned (O(1), copy on write) for
	// List snapshots and for the initial events of a watch.
	tree *btree.BTreeG[*Object]
	// namespaces counts the location's objects per logical cluster and namespace.
	namespaces map[clusterNamespace]int
	// clusters counts the location's objects per logical cluster.
	clusters map[string]int
	// deleting counts the location's objects whose view shows a deletionTimestamp: deletions
	// pending at the location (deletion.go).
	deleting int

	// firstSeen is when this store created the entry: when it first saw the location (object
	// or watcher) since the entry was last freed empty.
	firstSeen time.Time
	// lastChangeRV is the resourceVersion of the last event that changed the location's
	// content. The live tree equals the location's state at every RV >= lastChangeRV.
	lastChangeRV uint64
	// rerenderedRV is the resourceVersion of the last re-rendering (ResourceStore.SetRules)
	// that changed the location's content: its content at that RV changed without the RV
	// moving, so a paginated list at that RV or older cannot continue without its snapshot.
	rerenderedRV uint64

	// watchers are the location's registered watchers; watcher.pos is the position in it.
	watchers []*watcher
}

func newLocationIndex(name string, now time.Time) *locationIndex {
	return &locationIndex{
		name:       name,
		tree:       newObjectTree(),
		namespaces: map[clusterNamespace]int{},
		clusters:   map[string]int{},
		firstSeen:  now,
	}
}

// insert adds o, which must not be in the index yet. It returns the change of the location's
// pending deletions (deleting): 1 when the view shows o deleting, else 0.
func (li *locationIndex) insert(o *Object) int {
	li.tree.ReplaceOrInsert(o)
	li.namespaces[clusterNamespace{o.cluster, o.namespace}]++
	li.clusters[o.cluster]++
	d := li.pending(o)
	li.deleting += d
	return d
}

// replace swaps old for new, which have the same contract.Key, and returns the change of the
// location's pending deletions (-1, 0 or 1).
func (li *locationIndex) replace(old, new *Object) int {
	li.tree.ReplaceOrInsert(new)
	d := li.pending(new) - li.pending(old)
	li.deleting += d
	return d
}

// pending is 1 when the location's view shows o with a deletionTimestamp, else 0.
func (li *locationIndex) pending(o *Object) int {
	if o.marks.deletionShown(o.assigned, li.name) {
		return 1
	}
	return 0
}

// remove deletes o (found by contract.Key) and returns the change of the location's pending
// deletions (-1 or 0).
func (li *locationIndex) remove(o *Object) int {
	li.tree.Delete(o)
	d := -li.pending(o)
	li.deleting += d
	cn := clusterNamespace{o.cluster, o.namespace}
	if n := li.namespaces[cn] - 1; n > 0 {
		li.namespaces[cn] = n
	} else {
		delete(li.namespaces, cn)
	}
	if n := li.clusters[o.cluster] - 1; n > 0 {
		li.clusters[o.cluster] = n
	} else {
		delete(li.clusters, o.cluster)
	}
	return d
}

// getKey returns the location's object with contract.Key k.
func (li *locationIndex) getKey(k contract.Key) (*Object, bool) {
	return li.tree.Get(&Object{key: k})
}

// lookup returns the location's objects namespace/name of every logical cluster, sorted by
// contract.Key: one B-tree lookup per logical cluster the location holds objects of (one on a
// plain source). Reads by name are rare next to lists and watches, so the location keeps no
// second index by name, which would cost memory per object and location.
func (li *locationIndex) lookup(namespace, name string) []*Object {
	clusters := make([]string, 0, len(li.clusters))
	for c := range li.clusters {
		clusters = append(clusters, c)
	}
	sort.Strings(clusters)
	var out []*Object
	for _, c := range clusters {
		if o, ok := li.getKey(contract.NewKey(c, namespace, name)); ok {
			out = append(out, o)
		}
	}
	return out
}

// addWatcher registers w with the location.
func (li *locationIndex) addWatcher(w *watcher) {
	w.pos = len(li.watchers)
	li.watchers = append(li.watchers, w)
}

// removeWatcher unregisters w in O(1) (swap with the last watcher).
func (li *locationIndex) removeWatcher(w *watcher) {
	last := len(li.watchers) - 1
	if w.pos < 0 || w.pos > last || li.watchers[w.pos] != w {
		return
	}
	moved := li.watchers[last]
	li.watchers[w.pos] = moved
	moved.pos = w.pos
	li.watchers[last] = nil
	li.watchers = li.watchers[:last]
	w.pos = -1
}
