package rawjson

import "strings"

// Interner keeps one copy of the strings many stored objects share (label keys and values,
// namespaces, read from their JSON), so that each object's metadata does not hold its own. The
// table only grows, so it is bounded: strings longer than maxInternedLen, and any string once
// the table holds maxInterned entries, are returned as they are. The zero Interner is ready to
// use. Not safe for concurrent use: pkg/cache's store uses it under its write lock.
type Interner struct {
	m map[string]string
}

const (
	// maxInterned bounds the interner's table (at most a few MiB): a source whose label values
	// are all different (a hash per object) gains nothing from interning them.
	maxInterned = 1 << 16
	// maxInternedLen is the longest string interned.
	maxInternedLen = 128
)

// Get returns the canonical copy of s: the first copy of an equal string Get was given (its
// own clone of it), or s itself when s is not interned (too long, or the table is full).
func (in *Interner) Get(s string) string {
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
