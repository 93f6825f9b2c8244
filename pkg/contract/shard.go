package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Shards: several active mappers may share one location, each owning a part of it
// (docs/mapper.md, "Shards"; docs/views.md, "Shards"). A part is named by the
// path below the view's base, so that a kubeconfig whose server is the part's URL makes
// client-go, informers and kubectl work unchanged:
//
//	<view>/clusters/<c>[,<c>...]         the objects of the listed logical clusters
//	<view>/shards/<i>-of-<n>             the objects of hash shard i of n
//	<view>/clusters/<c>[,...]/shards/<i>-of-<n>   both
//
// A hash shard holds the objects whose ShardOf(cluster, namespace, n) is i: every object of one
// namespace of one logical cluster is in the same shard (cluster-scoped objects have the
// namespace ""), so a shard's objects are whole key ranges of the location's index
// (contract.Key starts with "cluster|namespace/").

// ShardsSegment starts the part of a view path that names a hash shard:
// <view>[/clusters/<clusters>]/shards/<index>-of-<count>/...
const ShardsSegment = "shards"

// MaxShards is the largest shard count a view or a mapper accepts.
const MaxShards = 1024

// Shard is hash shard Index of Count of a location (0 <= Index < Count). The zero Shard (Count
// 0) is no sharding: every object.
type Shard struct {
	Index, Count int
}

// FNV-1a, 32 bits (the FNV specification, draft-eastlake-fnv; Go's hash/fnv.New32a computes the
// same), computed in place so that the watch path hashes without allocating.
const (
	fnv32Offset = 2166136261
	fnv32Prime  = 16777619
)

// fnv1a32 continues the FNV-1a hash h over s.
func fnv1a32(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= fnv32Prime
	}
	return h
}

// ShardOf returns the hash shard, in [0, count), of the objects of namespace ("" for
// cluster-scoped objects) in the logical cluster cluster: the 32-bit FNV-1a hash of
// "<cluster>|<namespace>" modulo count. It is the one definition the server (which serves a
// shard's part of a view) and the mapper (which sweeps only its shard's copies) share. count
// must be positive.
func ShardOf(cluster, namespace string, count int) int {
	h := fnv1a32(fnv32Offset, cluster)
	h = fnv1a32(h, "|")
	h = fnv1a32(h, namespace)
	return int(h % uint32(count))
}

// IsZero reports whether s is no sharding (Count 0).
func (s Shard) IsZero() bool { return s.Count == 0 }

// Contains reports whether the objects of namespace in cluster are in s (always for the zero
// Shard).
func (s Shard) Contains(cluster, namespace string) bool {
	return s.Count == 0 || ShardOf(cluster, namespace, s.Count) == s.Index
}

// String returns the flag form "<index>/<count>" ("" for the zero Shard).
func (s Shard) String() string {
	if s.Count == 0 {
		return ""
	}
	return strconv.Itoa(s.Index) + "/" + strconv.Itoa(s.Count)
}

// segment returns the path form "<index>-of-<count>".
func (s Shard) segment() string { return strconv.Itoa(s.Index) + "-of-" + strconv.Itoa(s.Count) }

// ParseShard parses the flag form "<index>/<count>" (the mapper's --shard): count in
// [1, MaxShards], index in [0, count). It returns an error saying why otherwise.
func ParseShard(s string) (Shard, error) {
	i, n, ok := strings.Cut(s, "/")
	if !ok {
		return Shard{}, fmt.Errorf("%q is not a shard: want <index>/<count>, e.g. 0/4", Truncate(s, maxQuoted))
	}
	return newShard(s, i, n)
}

// parseShardSegment parses the path form "<index>-of-<count>".
func parseShardSegment(s string) (Shard, error) {
	i, n, ok := strings.Cut(s, "-of-")
	if !ok {
		return Shard{}, fmt.Errorf("%q is not a shard: want <index>-of-<count>, e.g. 0-of-4", Truncate(s, maxQuoted))
	}
	return newShard(s, i, n)
}

// newShard checks the index and count of the shard written as s.
func newShard(s, index, count string) (Shard, error) {
	i, err1 := strconv.Atoi(index)
	n, err2 := strconv.Atoi(count)
	// Atoi accepts "+1" and "01"; only canonical decimal numbers name a shard, so that one
	// shard has one path.
	if err1 != nil || err2 != nil || strconv.Itoa(i) != index || strconv.Itoa(n) != count {
		return Shard{}, fmt.Errorf("%q is not a shard: index and count must be decimal numbers", Truncate(s, maxQuoted))
	}
	if n < 1 || n > MaxShards || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("%q is not a shard: the count must be in [1, %d] and the index in [0, count)", Truncate(s, maxQuoted), MaxShards)
	}
	return Shard{Index: i, Count: n}, nil
}

// ViewPart is the part of a location's view that a path below the view's base selects: the
// objects of some logical clusters, of one hash shard, or both. The zero ViewPart is the whole
// location (the base path). A mapper pointed at a part's URL owns that part: it lists, applies,
// sweeps and deletes only inside it (docs/mapper.md, "Shards").
type ViewPart struct {
	// Clusters, when not empty, are the logical clusters of the part, sorted and distinct (a
	// /clusters/<c>[,<c>...] path).
	Clusters []ClusterName
	// Shard, when not zero, is the hash shard of the part (a /shards/<i>-of-<n> path).
	Shard Shard
}

// NewViewPart returns the part of the clusters (in any order; duplicates are dropped) and the
// hash shard. The cluster names are not validated.
func NewViewPart(clusters []ClusterName, shard Shard) ViewPart {
	var cs []ClusterName
	if len(clusters) > 0 {
		cs = slices.Clone(clusters)
		slices.Sort(cs)
		cs = slices.Compact(cs)
	}
	return ViewPart{Clusters: cs, Shard: shard}
}

// Whole reports whether p is the whole location.
func (p ViewPart) Whole() bool { return len(p.Clusters) == 0 && p.Shard.IsZero() }

// Cluster returns the logical cluster of a part of exactly one cluster (a per-cluster view,
// whose requests by name read and write in that cluster), else "".
func (p ViewPart) Cluster() ClusterName {
	if len(p.Clusters) == 1 {
		return p.Clusters[0]
	}
	return ""
}

// HasCluster reports whether the part holds objects of cluster at all (every cluster when it
// names none).
func (p ViewPart) HasCluster(cluster string) bool {
	if len(p.Clusters) == 0 {
		return true
	}
	_, found := slices.BinarySearch(p.Clusters, ClusterName(cluster))
	return found
}

// Contains reports whether the objects of namespace ("" for cluster-scoped objects) in the
// logical cluster cluster are in p. It allocates nothing: the view runs it per watch event.
func (p ViewPart) Contains(cluster, namespace string) bool {
	return p.HasCluster(cluster) && p.Shard.Contains(cluster, namespace)
}

// Equal reports whether p and q select the same part.
func (p ViewPart) Equal(q ViewPart) bool {
	return p.Shard == q.Shard && slices.Equal(p.Clusters, q.Clusters)
}

// Path returns the path of p below a view's base: "" for the whole location, else
// "/clusters/<c>[,<c>...]" and/or "/shards/<i>-of-<n>".
func (p ViewPart) Path() string {
	var b strings.Builder
	if len(p.Clusters) > 0 {
		b.WriteString("/" + ClustersSegment + "/")
		for i, c := range p.Clusters {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(string(c))
		}
	}
	if !p.Shard.IsZero() {
		b.WriteString("/" + ShardsSegment + "/" + p.Shard.segment())
	}
	return b.String()
}

// String returns the part's name, its path without the leading "/" ("" for the whole
// location): "shards/2-of-4", "clusters/a,b". Logs, metrics (label shard) and the SyncTarget's
// status.shards name a mapper's part so.
func (p ViewPart) String() string { return strings.TrimPrefix(p.Path(), "/") }

// NameSuffix returns a DNS-1123 label naming the part ("" for the whole location), for
// object names such as the part's Leases: "<i>-of-<n>" for a hash shard of every cluster, else
// "c-" and the first 10 hex digits of the SHA-256 of String() (cluster names may hold ':'), with
// "-<i>-of-<n>" for a hash shard of those clusters.
func (p ViewPart) NameSuffix() string {
	switch {
	case p.Whole():
		return ""
	case len(p.Clusters) == 0:
		return p.Shard.segment()
	}
	sum := sha256.Sum256([]byte(ViewPart{Clusters: p.Clusters}.String()))
	s := "c-" + hex.EncodeToString(sum[:])[:10]
	if !p.Shard.IsZero() {
		s += "-" + p.Shard.segment()
	}
	return s
}

// ShardLeaseName returns the name of a part's Lease named after location: location itself for
// the whole location, else "<location>.<NameSuffix>" (a DNS-1123 subdomain). The location
// lifecycle controller finds the location of such a Lease with LocationOfLease.
func ShardLeaseName(location string, p ViewPart) string {
	if p.Whole() {
		return location
	}
	return location + "." + p.NameSuffix()
}

// LocationOfLease returns the location of a Lease named by ShardLeaseName (the name up to its
// first "."; location names hold none).
func LocationOfLease(name string) string {
	location, _, _ := strings.Cut(name, ".")
	return location
}

// parseViewPart reads the part at the start of p, an inner view path starting with "/" and
// already checked to be canonical: an optional /clusters/<c>[,<c>...] followed by an optional
// /shards/<i>-of-<n>. It returns the part and the rest of the path ("/" when nothing follows).
// A part segment without a value, or with an invalid value, is an error.
func parseViewPart(p string) (ViewPart, string, error) {
	var part ViewPart
	if rest, ok := strings.CutPrefix(p, "/"+ClustersSegment+"/"); ok {
		list, below, _ := strings.Cut(rest, "/")
		names := strings.Split(list, ",")
		clusters := make([]ClusterName, 0, len(names))
		for _, name := range names {
			if err := ValidateClusterName(name); err != nil {
				return ViewPart{}, "", err
			}
			clusters = append(clusters, ClusterName(name))
		}
		part.Clusters = NewViewPart(clusters, Shard{}).Clusters
		p = "/" + below
	}
	if rest, ok := strings.CutPrefix(p, "/"+ShardsSegment+"/"); ok {
		seg, below, _ := strings.Cut(rest, "/")
		s, err := parseShardSegment(seg)
		if err != nil {
			return ViewPart{}, "", err
		}
		part.Shard, p = s, "/"+below
	}
	return part, p, nil
}

// ParseViewPartName parses a part's name (ViewPart.String: "shards/2-of-4", "clusters/a,b",
// "clusters/a/shards/0-of-2"; "" is the whole location). It returns an error saying why for
// anything else.
func ParseViewPartName(name string) (ViewPart, error) {
	if name == "" {
		return ViewPart{}, nil
	}
	part, rest, err := parseViewPart("/" + name + "/")
	if err != nil {
		return ViewPart{}, err
	}
	if rest != "/" || part.Whole() {
		return ViewPart{}, fmt.Errorf("%q is not the name of a part of a view: want clusters/<c>[,<c>...] and/or shards/<index>-of-<count>", Truncate(name, maxQuoted))
	}
	return part, nil
}

// Siblings returns the parts that together with p cover what p's clusters (or the whole
// location) hold: for a hash shard of count n, the shards 0..n-1 of the same clusters, in
// index order; for a part without a hash shard, p alone (the other clusters' mappers cannot be
// known from p).
func (p ViewPart) Siblings() []ViewPart {
	if p.Shard.IsZero() {
		return []ViewPart{p}
	}
	out := make([]ViewPart, p.Shard.Count)
	for i := range out {
		out[i] = ViewPart{Clusters: p.Clusters, Shard: Shard{Index: i, Count: p.Shard.Count}}
	}
	return out
}
