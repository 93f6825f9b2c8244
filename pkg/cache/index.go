package cache

import (
	"sort"
	"time"

	"github.com/google/btree"
)

// btreeDegree is the degree of the per-location B-trees (google/btree recommends small tens).
const btreeDegree = 32

// objectLess orders Objects by contract.Key, the order of List pages.
func objectLess(a, b *Object) bool { return a.key < b.key }

// newObjectTree returns an empty per-location B-tree ordered by contract.Key.
func newObjectTree() *btree.BTreeG[*Object] { return btree.NewG(btreeDegree, objectLess) }

// nsName is the secondary index key for Get by namespace/name.
type nsName struct{ namespace, name string }

// clusterNamespace is a namespace of one logical cluster.
type clusterNamespace struct{ cluster, namespace string }

// locationIndex is everything a ResourceStore keeps about one location: the location's
// objects ordered by contract.Key, a namespace/name index for Get, per-namespace counts, and the
// watchers of the location. It is guarded by the store's mutex.
type locationIndex struct {
	name string

	// tree holds the location's objects ordered by contract.Key. Cloned (O(1), copy on write) for
	// List snapshots and for the initial events of a watch.
	tree *btree.BTreeG[*Object]
	// byName maps namespace/name to the location's objects with that namespace/name, sorted by
	// contract.Key (more than one only when several logical clusters hold the same namespace/name).
	byName map[nsName][]*Object
	// namespaces counts the location's objects per logical cluster and namespace.
	namespaces map[clusterNamespace]int
	// clusters counts the location's objects per logical cluster.
	clusters map[string]int

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
		byName:     map[nsName][]*Object{},
		namespaces: map[clusterNamespace]int{},
		clusters:   map[string]int{},
		firstSeen:  now,
	}
}

// insert adds o, which must not be in the index yet.
func (li *locationIndex) insert(o *Object) {
	li.tree.ReplaceOrInsert(o)
	k := nsName{o.namespace, o.name}
	objs := li.byName[k]
	i := sort.Search(len(objs), func(i int) bool { return objs[i].key >= o.key })
	objs = append(objs, nil)
	copy(objs[i+1:], objs[i:])
	objs[i] = o
	li.byName[k] = objs
	li.namespaces[clusterNamespace{o.cluster, o.namespace}]++
	li.clusters[o.cluster]++
}

// replace swaps old for new, which have the same contract.Key.
func (li *locationIndex) replace(old, new *Object) {
	li.tree.ReplaceOrInsert(new)
	objs := li.byName[nsName{old.namespace, old.name}]
	for i := range objs {
		if objs[i].key == old.key {
			objs[i] = new
			return
		}
	}
}

// remove deletes o (found by contract.Key).
func (li *locationIndex) remove(o *Object) {
	li.tree.Delete(o)
	k := nsName{o.namespace, o.name}
	objs := li.byName[k]
	for i := range objs {
		if objs[i].key == o.key {
			objs = append(objs[:i:i], objs[i+1:]...)
			break
		}
	}
	if len(objs) == 0 {
		delete(li.byName, k)
	} else {
		li.byName[k] = objs
	}
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
}

// get returns the location's object namespace/name with the lowest contract.Key.
func (li *locationIndex) get(namespace, name string) (*Object, bool) {
	objs := li.byName[nsName{namespace, name}]
	if len(objs) == 0 {
		return nil, false
	}
	return objs[0], true
}

// lookup returns the location's objects namespace/name of every logical cluster, sorted by
// contract.Key (shared slice: READ-ONLY).
func (li *locationIndex) lookup(namespace, name string) []*Object {
	return li.byName[nsName{namespace, name}]
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
