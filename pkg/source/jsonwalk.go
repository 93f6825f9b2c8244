package source

import (
	"bytes"
	"errors"
	"fmt"

	kjson "sigs.k8s.io/json"
)

// This file walks JSON text without decoding it: it finds where values begin and end, so that an
// object's metadata can be read and its bytes kept (Object) without building a tree of maps.
// The text has already been validated (validJSON: a list body when it is decoded, a watch
// event when it is framed), so the walker only tracks strings and nesting; it still never
// reads out of bounds and reports malformed text as an error.

// errTruncated is returned for JSON text that ends inside a value.
var errTruncated = errors.New("unexpected end of JSON input")

// skipSpace returns the index of the first byte at or after i that is not JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just after the JSON string whose opening quote is b[i]. It
// jumps from quote to quote (bytes.IndexByte): a quote ends the string unless an odd number of
// backslashes precedes it.
func skipString(b []byte, i int) (int, error) {
	for j := i + 1; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, errTruncated
		}
		q := j + k
		escapes := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			escapes++
		}
		if escapes%2 == 0 {
			return q + 1, nil
		}
		j = q + 1
	}
}

// skipValue returns the start (after whitespace) and the end (just after) of the JSON value at
// or after b[i].
func skipValue(b []byte, i int) (start, end int, err error) {
	i = skipSpace(b, i)
	if i >= len(b) {
		return 0, 0, errTruncated
	}
	switch b[i] {
	case '"':
		end, err = skipString(b, i)
		return i, end, err
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				k, err := skipString(b, j)
				if err != nil {
					return 0, 0, err
				}
				j = k - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i, j + 1, nil
				}
			}
		}
		return 0, 0, errTruncated
	default: // a number, true, false or null
		for j := i; j < len(b); j++ {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				if j == i {
					return 0, 0, fmt.Errorf("invalid character %q at offset %d", b[j], j)
				}
				return i, j, nil
			}
		}
		return i, len(b), nil
	}
}

// member is one member of a JSON object: the key's token (with its quotes, as written) and
// where the member and its value are in the text.
type member struct {
	key []byte
	// start is the index of the key's opening quote; valueStart and end delimit the value.
	start, valueStart, end int
}

// walkObject calls fn for each member of the JSON object at or after b[i], in order, and
// returns the index of its opening brace and the index just after its closing brace. It stops
// at fn's first error.
func walkObject(b []byte, i int, fn func(m member) error) (open, end int, err error) {
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != '{' {
		return 0, 0, fmt.Errorf("expected a JSON object at offset %d", i)
	}
	open = i
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return open, i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, 0, fmt.Errorf("expected a member name at offset %d", i)
		}
		keyEnd, err := skipString(b, i)
		if err != nil {
			return 0, 0, err
		}
		colon := skipSpace(b, keyEnd)
		if colon >= len(b) || b[colon] != ':' {
			return 0, 0, fmt.Errorf("expected ':' at offset %d", colon)
		}
		vs, ve, err := skipValue(b, colon+1)
		if err != nil {
			return 0, 0, err
		}
		if err := fn(member{key: b[i:keyEnd], start: i, valueStart: vs, end: ve}); err != nil {
			return 0, 0, err
		}
		i = skipSpace(b, ve)
		if i >= len(b) {
			return 0, 0, errTruncated
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return open, i + 1, nil
		default:
			return 0, 0, fmt.Errorf("invalid character %q after a member at offset %d", b[i], i)
		}
	}
}

// walkArray calls fn with the range of each element of the JSON array at or after b[i], in
// order, and returns the index just after its closing bracket. It stops at fn's first error.
func walkArray(b []byte, i int, fn func(start, end int) error) (int, error) {
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != '[' {
		return 0, fmt.Errorf("expected a JSON array at offset %d", i)
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		vs, ve, err := skipValue(b, i)
		if err != nil {
			return 0, err
		}
		if err := fn(vs, ve); err != nil {
			return 0, err
		}
		i = skipSpace(b, ve)
		if i >= len(b) {
			return 0, errTruncated
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return 0, fmt.Errorf("invalid character %q after an array element at offset %d", b[i], i)
		}
	}
}

// unquote returns the string a JSON string token (with its quotes) denotes.
func unquote(tok []byte) (string, error) {
	if len(tok) >= 2 && tok[0] == '"' && tok[len(tok)-1] == '"' && bytes.IndexByte(tok, '\\') < 0 {
		return string(tok[1 : len(tok)-1]), nil
	}
	var s string
	if err := kjson.UnmarshalCaseSensitivePreserveInts(tok, &s); err != nil {
		return "", err
	}
	return s, nil
}

// stringMap decodes a JSON object whose values are strings (labels, annotations); null is an
// empty map.
func stringMap(v []byte) (map[string]string, error) {
	if string(v) == "null" {
		return nil, nil
	}
	out := map[string]string{}
	_, _, err := walkObject(v, 0, func(m member) error {
		k, err := unquote(m.key)
		if err != nil {
			return err
		}
		s, err := unquote(v[m.valueStart:m.end])
		if err != nil {
			return fmt.Errorf("the value of %q is not a string", k)
		}
		out[k] = s
		return nil
	})
	return out, err
}

// errDuplicateMember is returned by ValueRange for an object that has a member on the path twice.
var errDuplicateMember = errors.New("a member occurs twice")

// ValueRange returns where the value at path is in raw, the JSON text of an object: raw[start:end]
// is the value of member path[0] of raw, or of member path[1] of that value, and so on (for
// example "metadata", "generation"). found is false when a member on the path is missing, or a
// value on the way is not an object. Member names are compared as the strings they denote.
//
// raw is text the source package validated (Object.JSON); an error reports malformed text, or a
// member on the path that occurs twice (encoding/json would take the last, a reader of bytes
// cannot tell which counts). The cache uses it to compare two versions of an object as bytes
// around the values every version changes (pkg/cache fromjson.go).
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
		_, _, err = walkObject(raw[:end], start, func(m member) error {
			if last {
				s.CutEnd, last = m.start, false // the name of the member after it
			}
			if string(memberName(m.key)) == name {
				n++
				s = MemberSpan{Start: m.start, ValueStart: m.valueStart, End: m.end, CutStart: m.start, CutEnd: m.end}
				if prevEnd > 0 {
					s.CutStart = prevEnd
				} else {
					last = true
				}
			}
			prevEnd = m.end
			return nil
		})
		switch {
		case err != nil:
			return MemberSpan{}, false, err
		case n > 1:
			return MemberSpan{}, false, fmt.Errorf("%w: %q", errDuplicateMember, name)
		case n == 0:
			return MemberSpan{}, false, nil
		}
		span, start, end = s, s.ValueStart, s.End
	}
	return span, true, nil
}
