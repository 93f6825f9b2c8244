package placement

import (
	"slices"
	"strings"
)

// FNV-1a, 64 bit (hash/fnv's constants), written out so that a key is hashed once per object
// and nothing is allocated per location.
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// keyHash is the FNV-1a state after the object's key and a zero byte.
func keyHash(key string) uint64 {
	h := uint64(fnvOffset64)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= fnvPrime64
	}
	return h * fnvPrime64 // the zero separator: h ^= 0, then the multiplication
}

// score is the rendezvous (highest random weight) score of location for the object whose
// keyHash is h: FNV-1a of key, a zero byte and location, finished with the splitmix64 mixer so
// that keys differing in their last bytes still spread evenly. It is stable across processes
// and releases.
func score(h uint64, location string) uint64 {
	for i := 0; i < len(location); i++ {
		h ^= uint64(location[i])
		h *= fnvPrime64
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// scored is a location with its score for one object.
type scored struct {
	name  string
	score uint64
}

// before orders by score, highest first, then by name.
func before(a, b scored) int {
	switch {
	case a.score > b.score:
		return -1
	case a.score < b.score:
		return 1
	}
	return strings.Compare(a.name, b.name)
}

// scoreAll returns locations with their scores for the object with key, unordered.
func scoreAll(key string, locations []string) []scored {
	h := keyHash(key)
	s := make([]scored, len(locations))
	for i, l := range locations {
		s[i] = scored{l, score(h, l)}
	}
	return s
}

// top returns the names of the first k entries of s, in rank order, that accept accepts (all
// of them when k < 0). For small k it scans instead of sorting (O(len(s)·k)), as an object
// usually goes to a few of many locations.
func top(s []scored, k int, accept func(string) bool) []string {
	if k < 0 || k > 16 {
		sorted := slices.Clone(s)
		slices.SortFunc(sorted, before)
		var out []string
		for _, e := range sorted {
			if (k < 0 || len(out) < k) && accept(e.name) {
				out = append(out, e.name)
			}
		}
		return out
	}
	best := make([]scored, 0, k)
	for _, e := range s {
		if !accept(e.name) {
			continue
		}
		i, _ := slices.BinarySearchFunc(best, e, before)
		if i >= k {
			continue
		}
		if len(best) == k {
			best = best[:k-1]
		}
		best = slices.Insert(best, i, e)
	}
	out := make([]string, len(best))
	for i, e := range best {
		out[i] = e.name
	}
	return out
}

// Rank returns locations ordered by their rendezvous score for the object with key, highest
// first (ties by name). The first N of the result are the object's N locations: when a
// location leaves, only the objects that had it among their first N move, and when one comes,
// only the objects that rank it among their first N would (Thaler and Ravishankar, "Using
// name-based mappings to increase hit rates", 1998). The input is not changed.
func Rank(key string, locations []string) []string {
	return top(scoreAll(key, locations), -1, func(string) bool { return true })
}
