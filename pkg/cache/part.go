package cache

import (
	"sort"
	"strings"

	"github.com/google/btree"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// A part of a location (contract.ViewPart: some logical clusters, a hash shard, or both) is
// served without visiting the rest of the location. Keys are "cluster|namespace/name", so
//   - one cluster's objects are the key range with the prefix "cluster|", and
//   - one namespace's objects of one cluster, the unit a hash shard is made of, are the range
//     with the prefix "cluster|namespace/" ("cluster|" for cluster-scoped objects).
//
// A list or the initial events of a watch of a part visit, per cluster of the part, either the
// cluster's range (no shard) or, with a shard, each (cluster, namespace) range of the tree: one
// B-tree seek past each range of another shard, one hash per range, and the objects of the
// shard's ranges in one run. The cost is O((namespaces of the location) × log n + objects of
// the part), never the location's objects. Live events are checked with part.Contains, one
// hash of the object's cluster and namespace per event and watcher of the part.

// groupPrefix returns the common prefix of the keys of o's namespace in o's cluster:
// "cluster|namespace/", or "cluster|" for a cluster-scoped object.
func groupPrefix(o *Object) contract.Key {
	if o.namespace == "" {
		return clusterPrefix(o.cluster)
	}
	return contract.Key(o.cluster + "|" + o.namespace + "/")
}

// successor returns the smallest key above every key with the prefix p (p with its last byte,
// '/' or '|', incremented: no key byte follows them in a name).
func successor(p contract.Key) contract.Key {
	b := []byte(p)
	b[len(b)-1]++
	return contract.Key(b)
}

// partRanges returns the key prefixes of the clusters of part in key order ("" for every
// cluster). Key order is not cluster-name order: "a-b|" sorts before "a|".
func partRanges(part contract.ViewPart) []contract.Key {
	if len(part.Clusters) == 0 {
		return []contract.Key{""}
	}
	out := make([]contract.Key, len(part.Clusters))
	for i, c := range part.Clusters {
		out[i] = clusterPrefix(string(c))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// ascendPart calls fn, in key order, for every object of tree in part whose key is at least
// from, until fn returns false. It returns false when fn stopped it.
func ascendPart(tree *btree.BTreeG[*Object], part contract.ViewPart, from contract.Key, fn func(*Object) bool) bool {
	for _, prefix := range partRanges(part) {
		start := max(from, prefix)
		if part.Shard.IsZero() {
			if !ascendRange(tree, start, prefix, fn) {
				return false
			}
			continue
		}
		// One scan runs through consecutive (cluster, namespace) ranges of the shard; a range of
		// another shard ends it, and the next scan starts past that range. The scan function,
		// the pivot and the group's cluster and namespace are reused across scans: a shard's
		// list allocates only the seek key past each range of another shard.
		var (
			inGroup              bool
			gCluster, gNamespace string
			next                 contract.Key
			stopped              bool
			pivot                = &Object{key: start}
		)
		scan := func(o *Object) bool {
			if prefix != "" && !strings.HasPrefix(string(o.key), string(prefix)) {
				return false // past the cluster
			}
			if !inGroup || o.cluster != gCluster || o.namespace != gNamespace {
				inGroup, gCluster, gNamespace = true, o.cluster, o.namespace
				if !part.Shard.Contains(o.cluster, o.namespace) {
					next = successor(groupPrefix(o))
					return false
				}
			}
			if !fn(o) {
				stopped = true
				return false
			}
			return true
		}
		for {
			inGroup, next = false, ""
			tree.AscendGreaterOrEqual(pivot, scan)
			if stopped {
				return false
			}
			if next == "" {
				break // the tree or the cluster ended
			}
			pivot.key = next
		}
	}
	return true
}

// ascendRange calls fn for the objects of tree from start on while their keys have the prefix
// prefix ("" for all). It returns false when fn stopped it.
func ascendRange(tree *btree.BTreeG[*Object], start, prefix contract.Key, fn func(*Object) bool) bool {
	stopped := false
	iter := func(o *Object) bool {
		if prefix != "" && !strings.HasPrefix(string(o.key), string(prefix)) {
			return false
		}
		if !fn(o) {
			stopped = true
			return false
		}
		return true
	}
	if start == "" {
		tree.Ascend(iter)
	} else {
		tree.AscendGreaterOrEqual(&Object{key: start}, iter)
	}
	return !stopped
}

// inPart reports whether o is in part (a watch's live events).
func inPart(part contract.ViewPart, o *Object) bool { return part.Contains(o.cluster, o.namespace) }
