package rawjson

import (
	"bytes"
	"errors"
	"fmt"

	kjson "sigs.k8s.io/json"
)

// This file walks JSON text without decoding it: it finds where values begin and end, so that an
// object's metadata can be read and its bytes kept (Object) without building a tree of maps.
// The text has already been validated (Valid: a list body when it is decoded, a watch
// event when it is framed), so the walker only tracks strings and nesting; it still never
// reads out of bounds and reports malformed text as an error.

// ErrTruncated is returned for JSON text that ends inside a value.
var ErrTruncated = errors.New("unexpected end of JSON input")

// SkipSpace returns the index of the first byte at or after i that is not JSON whitespace.
func SkipSpace(b []byte, i int) int {
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
			return 0, ErrTruncated
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
	i = SkipSpace(b, i)
	if i >= len(b) {
		return 0, 0, ErrTruncated
	}
	switch b[i] {
	case '"':
		end, err = skipString(b, i)
		return i, end, err
	case '{', '[':
		// The framer's search for the end of a container, on the whole text.
		var st endState
		if end, ok := st.find(b, i); ok {
			return i, end, nil
		}
		return 0, 0, ErrTruncated
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

// Member is one member of a JSON object (WalkObject): the name's token and where the member
// and its value are in the text.
type Member struct {
	// Key is the member name's token as written, with its quotes (MemberName, Unquote read it).
	Key []byte
	// Start is the index of the name's opening quote; ValueStart and End delimit the value:
	// text[ValueStart:End] is the value as written.
	Start, ValueStart, End int
}

// WalkObject calls fn for each member of the JSON object at or after b[i], in order, and
// returns the index of its opening brace and the index just after its closing brace. It stops
// at fn's first error.
func WalkObject(b []byte, i int, fn func(m Member) error) (open, end int, err error) {
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != '{' {
		return 0, 0, fmt.Errorf("expected a JSON object at offset %d", i)
	}
	open = i
	i = SkipSpace(b, i+1)
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
		colon := SkipSpace(b, keyEnd)
		if colon >= len(b) || b[colon] != ':' {
			return 0, 0, fmt.Errorf("expected ':' at offset %d", colon)
		}
		vs, ve, err := skipValue(b, colon+1)
		if err != nil {
			return 0, 0, err
		}
		if err := fn(Member{Key: b[i:keyEnd], Start: i, ValueStart: vs, End: ve}); err != nil {
			return 0, 0, err
		}
		i = SkipSpace(b, ve)
		if i >= len(b) {
			return 0, 0, ErrTruncated
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case '}':
			return open, i + 1, nil
		default:
			return 0, 0, fmt.Errorf("invalid character %q after a member at offset %d", b[i], i)
		}
	}
}

// WalkArray calls fn with the range of each element of the JSON array at or after b[i], in
// order, and returns the index just after its closing bracket. It stops at fn's first error.
func WalkArray(b []byte, i int, fn func(start, end int) error) (int, error) {
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != '[' {
		return 0, fmt.Errorf("expected a JSON array at offset %d", i)
	}
	i = SkipSpace(b, i+1)
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
		i = SkipSpace(b, ve)
		if i >= len(b) {
			return 0, ErrTruncated
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return 0, fmt.Errorf("invalid character %q after an array element at offset %d", b[i], i)
		}
	}
}

// Unquote returns the string a JSON string token (with its quotes) denotes.
func Unquote(tok []byte) (string, error) {
	if len(tok) >= 2 && tok[0] == '"' && tok[len(tok)-1] == '"' && bytes.IndexByte(tok, '\\') < 0 {
		return string(tok[1 : len(tok)-1]), nil
	}
	var s string
	if err := kjson.UnmarshalCaseSensitivePreserveInts(tok, &s); err != nil {
		return "", err
	}
	return s, nil
}

// MemberName returns the name a member's key token (Member.Key) denotes, as bytes: the key without its
// quotes when it has no escapes (every key a Kubernetes API server writes), else the unquoted
// name (empty when the key is not a string). Callers compare it as string(MemberName(key)), in
// a switch or with ==, which Go does without allocating (a string returned here would be
// allocated for every member of every object decoded).
func MemberName(key []byte) []byte {
	if len(key) >= 2 && bytes.IndexByte(key, '\\') < 0 {
		return key[1 : len(key)-1]
	}
	s, _ := Unquote(key)
	return []byte(s)
}

// StringMap decodes a JSON object whose values are strings (labels, annotations); null is an
// empty map.
func StringMap(v []byte) (map[string]string, error) {
	if string(v) == "null" {
		return nil, nil
	}
	out := map[string]string{}
	_, _, err := WalkObject(v, 0, func(m Member) error {
		k, err := Unquote(m.Key)
		if err != nil {
			return err
		}
		s, err := Unquote(v[m.ValueStart:m.End])
		if err != nil {
			return fmt.Errorf("the value of %q is not a string", k)
		}
		out[k] = s
		return nil
	})
	return out, err
}
