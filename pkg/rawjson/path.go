package rawjson

import (
	"errors"
	"fmt"
)

// This file finds a member by its path of names (ValueRange, MemberRange): structurally, by
// walking the objects on the path, never by searching the text for the member's bytes.

// ErrDuplicateMember is returned by ValueRange for an object that has a member on the path twice.
var ErrDuplicateMember = errors.New("a member occurs twice")

// ValueRange returns where the value at path is in raw, the JSON text of an object: raw[start:end]
// is the value of member path[0] of raw, or of member path[1] of that value, and so on (for
// example "metadata", "generation"). found is false when a member on the path is missing, or a
// value on the way is not an object. Member names are compared as the strings they denote.
//
// raw is text Check found valid (pkg/source's Object.JSON); an error reports malformed text, or a
// member on the path that occurs twice (encoding/json would take the last, a reader of bytes
// cannot tell which counts). The cache uses it to compare two versions of an object as bytes
// around the values every version changes (pkg/cache fromjson.go).
//
// ValueRange finds the member by walking the objects on the path (MemberRange).
func ValueRange(raw []byte, path ...string) (start, end int, found bool, err error) {
	m, found, err := MemberRange(raw, path...)
	return m.ValueStart, m.End, found, err
}

// MemberSpan is where one member of a JSON object is in the object's text (MemberRange).
type MemberSpan struct {
	// Start is the index of the member name's opening quote; ValueStart and End delimit its
	// value.
	Start, ValueStart, End int
	// CutStart and CutEnd delimit the member with one comma that separates it from a
	// neighbour, what leaves a valid object when removed: from the end of the member before
	// it, else to the name of the member after it, else the member alone (the only one).
	CutStart, CutEnd int
}

// MemberRange returns where the member at path is in raw, the JSON text of an object (see
// ValueRange, which returns its value: the same rules, found and errors), for a caller that
// replaces or removes the whole member (a template view's metadata.finalizers, pkg/cache
// template.go). The member is found by walking the objects on the path, whatever the spacing
// and escapes of the text, never by searching for its bytes.
func MemberRange(raw []byte, path ...string) (span MemberSpan, found bool, err error) {
	start, end := 0, len(raw)
	span = MemberSpan{ValueStart: start, End: end, CutStart: start, CutEnd: end}
	for i, name := range path {
		if i > 0 && raw[start] != '{' {
			return MemberSpan{}, false, nil // the value on the way is not an object
		}
		var prevEnd, n int
		var last bool
		var s MemberSpan
		_, _, err = WalkObject(raw[:end], start, func(m Member) error {
			if last {
				s.CutEnd, last = m.Start, false // the name of the member after it
			}
			if string(MemberName(m.Key)) == name {
				n++
				s = MemberSpan{Start: m.Start, ValueStart: m.ValueStart, End: m.End, CutStart: m.Start, CutEnd: m.End}
				if prevEnd > 0 {
					s.CutStart = prevEnd
				} else {
					last = true
				}
			}
			prevEnd = m.End
			return nil
		})
		switch {
		case err != nil:
			return MemberSpan{}, false, err
		case n > 1:
			return MemberSpan{}, false, fmt.Errorf("%w: %q", ErrDuplicateMember, name)
		case n == 0:
			return MemberSpan{}, false, nil
		}
		span, start, end = s, s.ValueStart, s.End
	}
	return span, true, nil
}
