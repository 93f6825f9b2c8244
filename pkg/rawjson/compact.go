package rawjson

import (
	"bytes"
	"encoding/json"
	"fmt"

	kjson "sigs.k8s.io/json"
)

// Compact is the JSON text of one value that is valid (Check) and compact (no whitespace
// outside strings). It is made only here: by Normalize from text of unknown shape (what the
// source sent), whose result kube-apiserver's decoder also reads as written (no invalid UTF-8,
// no member name twice, no number outside the range of a float64); by Marshal from a Go value
// (encoding/json writes valid, compact text); and by Splice from another Compact. The view writes it to
// clients as it is (pkg/registry/view raw_encoding.go), which encoding/json would otherwise
// validate and compact again. The zero Compact holds no text.
type Compact struct {
	b []byte
}

// Bytes returns the text. The slice is shared: do not change it.
func (c Compact) Bytes() []byte { return c.b }

// Len returns the length of the text in bytes.
func (c Compact) Len() int { return len(c.b) }

// IsZero reports whether c holds no text (the zero Compact).
func (c Compact) IsZero() bool { return c.b == nil }

// Normalize returns data, the JSON text of one value, as Compact, and Check's report of it.
// Text that the decoder reads as written and that is compact is kept as it is (the Compact
// shares data); text with invalid UTF-8 or a member name twice is replaced by the decoder's
// reading encoded again (sigs.k8s.io/json, non-strict, then encoding/json, as kube-apiserver
// reads and writes objects: U+FFFD for invalid UTF-8, the last of duplicate members, integers
// kept as integers), and text with whitespace between tokens is compacted (encoding/json's
// Compact). Errors: text that is not valid JSON (naming the offset), or a number outside the
// range of a float64 (which the decoder refuses).
func Normalize(data []byte) (Compact, Report, error) {
	report, err := Check(data)
	if err != nil {
		return Compact{}, report, err
	}
	if report.BadNumber != nil {
		return Compact{}, report, report.BadNumber
	}
	if report.Normalize {
		var v interface{}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &v); err != nil {
			return Compact{}, report, err
		}
		c, err := Marshal(v)
		return c, report, err
	}
	if report.Spaced {
		var buf bytes.Buffer
		buf.Grow(len(data))
		if err := json.Compact(&buf, data); err != nil {
			return Compact{}, report, err
		}
		return Compact{b: buf.Bytes()}, report, nil
	}
	return Compact{b: data}, report, nil
}

// Marshal returns v encoded by encoding/json (json.Marshal), whose output is valid and compact;
// its error is json.Marshal's. A json.RawMessage in v is written as encoding/json writes it
// (validated and compacted, numbers taken as written).
func Marshal(v interface{}) (Compact, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Compact{}, err
	}
	return Compact{b: b}, nil
}

// Splice returns src without src[cutStart:cutEnd] (cutStart < 0: nothing cut) and with
// src[at:at+replace] replaced by insert (at < 0: no replacement), in one allocation of the
// exact size. The two ranges never overlap. The caller keeps the text valid: the cut is a whole
// member with one separating comma (MemberSpan's CutStart and CutEnd), and insert is compact
// text written by encoding/json (members with their commas, or a value in place of a value);
// pkg/source's FuzzDecodeObject holds the result to kube-apiserver's decoder. It panics on
// ranges outside src, as slicing does.
func Splice(src Compact, cutStart, cutEnd, at, replace int, insert []byte) Compact {
	s := src.b
	n := len(s) + len(insert) - replace
	if cutStart >= 0 {
		n -= cutEnd - cutStart
	}
	out := make([]byte, 0, n)
	pos := 0
	copyTo := func(end int) {
		out = append(out, s[pos:end]...)
		pos = end
	}
	if cutStart >= 0 && (at < 0 || cutStart < at) {
		copyTo(cutStart)
		pos = cutEnd
	}
	if at >= 0 {
		copyTo(at)
		out = append(out, insert...)
		pos += replace
	}
	if cutStart >= pos {
		copyTo(cutStart)
		pos = cutEnd
	}
	copyTo(len(s))
	return Compact{b: out}
}

// String returns the text, for messages and tests.
func (c Compact) String() string { return string(c.b) }

var _ fmt.Stringer = Compact{}
