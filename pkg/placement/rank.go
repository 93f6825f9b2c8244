package placement

import (
	"hash/fnv"
	"slices"
	"strings"
)

// score is the rendezvous (highest random weight) score of location for the object with key:
// a 64-bit FNV-1a hash of both, finished with the splitmix64 mixer so that keys differing in
// their last bytes still spread evenly. It is stable across processes and releases.
func score(key, location string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(location))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Rank returns locations ordered by their rendezvous score for the object with key, highest
// first (ties by name). The first N of the result are the object's N locations: when a
// location leaves, only the objects that had it among their first N move, and when one comes,
// only the objects that rank it among their first N would (Thaler and Ravishankar, "Using
// name-based mappings to increase hit rates", 1998). The input is not changed.
func Rank(key string, locations []string) []string {
	type scored struct {
		name  string
		score uint64
	}
	s := make([]scored, len(locations))
	for i, l := range locations {
		s[i] = scored{l, score(key, l)}
	}
	slices.SortFunc(s, func(a, b scored) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	out := make([]string, len(s))
	for i := range s {
		out[i] = s[i].name
	}
	return out
}
