package placement

import "slices"

// Divide splits replicas over locations, given in rank order, in proportion to weights
// (weights[i] belongs to locations[i]; all zero or nil means equal weights). It is the
// largest-remainder method: each location gets floor(replicas*w/W), and the replicas left
// go one each to the largest remainders, ties going to the larger weight and then to the
// earlier rank. The parts sum to replicas (for replicas >= 0 and at least one location) and
// do not depend on anything but the arguments. Negative weights count as 0; weights above
// 2^31 are scaled down together.
func Divide(replicas int64, locations []string, weights []int64) map[string]int64 {
	out := make(map[string]int64, len(locations))
	if len(locations) == 0 || replicas < 0 {
		return out
	}
	w := make([]int64, len(locations))
	var total, largest int64
	for i := range locations {
		if i < len(weights) && weights[i] > 0 {
			w[i] = weights[i]
			largest = max(largest, w[i])
		}
	}
	// Scale weights below 2^31 (memory in bytes is larger), so that replicas*w, with
	// replicas an int32 field, cannot overflow.
	if scale := largest>>31 + 1; scale > 1 {
		for i := range w {
			w[i] /= scale
		}
	}
	for i := range w {
		total += w[i]
	}
	if total == 0 {
		for i := range w {
			w[i] = 1
		}
		total = int64(len(w))
	}
	type share struct {
		i         int
		remainder int64
	}
	shares := make([]share, len(locations))
	var given int64
	for i, l := range locations {
		q := replicas * w[i]
		out[l] = q / total
		given += q / total
		shares[i] = share{i, q % total}
	}
	slices.SortStableFunc(shares, func(a, b share) int {
		switch {
		case a.remainder != b.remainder:
			return cmpDesc(a.remainder, b.remainder)
		case w[a.i] != w[b.i]:
			return cmpDesc(w[a.i], w[b.i])
		}
		return a.i - b.i
	})
	for k := 0; given < replicas; k = (k + 1) % len(shares) {
		out[locations[shares[k].i]]++
		given++
	}
	return out
}

// cmpDesc orders larger values first.
func cmpDesc(a, b int64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}
