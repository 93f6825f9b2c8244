package cache

import "strings"

// interner keeps one copy of the strings many stored objects share (label keys and values,
// namespaces), so that each object's metadata does not hold its own. The table only grows, so
// it is bounded: strings longer than maxInternedLen, and any string once the table holds
// maxInterned entries, are returned as they are. Not safe for concurrent use: the store uses it
// under writeMu.
type interner struct {
	m map[string]string
}

const (
	// maxInterned bounds the interner's table (at most a few MiB): a source whose label values
	// are all different (a hash per object) gains nothing from interning them.
	maxInterned = 1 << 16
	// maxInternedLen is the longest string interned.
	maxInternedLen = 128
)

// get returns the canonical copy of s.
func (in *interner) get(s string) string {
	if c, ok := in.m[s]; ok {
		return c
	}
	if len(s) > maxInternedLen || len(in.m) >= maxInterned {
		return s
	}
	if in.m == nil {
		in.m = map[string]string{}
	}
	// Its own copy, made now: s is the decoder's, allocated among the strings that die with the
	// source object, and would keep their span of the heap in use (ownStrings).
	s = strings.Clone(s)
	in.m[s] = s
	return s
}
