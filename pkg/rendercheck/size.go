package rendercheck

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// DefaultMaxBytes is the default bound of a rendering's size, 3 MiB: kube-apiserver's
// default limit of a request body (--max-request-bytes, k8s.io/apiserver's
// Config.MaxRequestBodyBytes) and of the growth of a JSON patch's copies
// (JSONPatchMaxCopyBytes). A target's kube-apiserver would refuse to receive a larger object,
// and one with the default etcd refuses to store one over 1.5 MiB.
const DefaultMaxBytes int64 = 3 * 1024 * 1024

// TooLarge returns a *Refusal of reason ReasonTooLarge when the JSON encoding of u is larger
// than maxBytes bytes (0: DefaultMaxBytes; negative: no bound), nil otherwise. The size is
// counted by walking u, without encoding it, and the walk stops as soon as maxBytes is passed,
// so the cost is at most that of walking maxBytes of JSON. The count is the size encoding/json
// writes (object keys, strings with their escapes, numbers as encoding/json formats them).
func TooLarge(u *unstructured.Unstructured, maxBytes int64) *Refusal {
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	if maxBytes < 0 {
		return nil
	}
	c := sizeCounter{limit: maxBytes}
	c.value(u.Object)
	if c.n > maxBytes {
		return &Refusal{Reason: ReasonTooLarge, Size: c.n, Limit: maxBytes}
	}
	return nil
}

// sizeCounter counts the bytes of JSON values, up to a little past limit.
type sizeCounter struct {
	n, limit int64
	buf      [64]byte // scratch for numbers
}

// over reports whether the count passed the limit (then counting stops).
func (c *sizeCounter) over() bool { return c.n > c.limit }

// value adds the size of v, a JSON value as unstructured objects hold them.
func (c *sizeCounter) value(v interface{}) {
	if c.over() {
		return
	}
	switch v := v.(type) {
	case nil:
		c.n += 4
	case bool:
		if v {
			c.n += 4
		} else {
			c.n += 5
		}
	case string:
		c.n += quotedSize(v)
	case int64:
		c.n += int64(len(strconv.AppendInt(c.buf[:0], v, 10)))
	case int:
		c.n += int64(len(strconv.AppendInt(c.buf[:0], int64(v), 10)))
	case int32:
		c.n += int64(len(strconv.AppendInt(c.buf[:0], int64(v), 10)))
	case float64:
		c.n += floatSize(c.buf[:0], v)
	case map[string]interface{}:
		c.n += 2 // {}
		first := true
		for k, e := range v {
			if !first {
				c.n++ // ,
			}
			first = false
			c.n += quotedSize(k) + 1 // "key":
			c.value(e)
			if c.over() {
				return
			}
		}
	case []interface{}:
		c.n += 2 // []
		for i, e := range v {
			if i > 0 {
				c.n++
			}
			c.value(e)
			if c.over() {
				return
			}
		}
	default:
		// Not a type of decoded JSON (a caller built the object by hand): encode it.
		b, err := json.Marshal(v)
		if err != nil {
			return
		}
		c.n += int64(len(b))
	}
}

// quotedSize is the size of s as a JSON string written by encoding/json (with HTML escaping):
// the quotes, two bytes for \" \\ \b \f \n \r \t, six for other control characters, <, >, &,
// U+2028, U+2029 and each byte of invalid UTF-8 (\ufffd).
func quotedSize(s string) int64 {
	n := int64(2)
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			n += int64(asciiSize[b])
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += int64(size)
		}
		i += size
	}
	return n
}

// asciiSize is the encoded size of each ASCII byte in a JSON string (quotedSize).
var asciiSize = func() (t [utf8.RuneSelf]uint8) {
	for b := range t {
		switch {
		case b == '"' || b == '\\' || b == '\b' || b == '\f' || b == '\n' || b == '\r' || b == '\t':
			t[b] = 2
		case b < 0x20 || b == '<' || b == '>' || b == '&':
			t[b] = 6
		default:
			t[b] = 1
		}
	}
	return t
}()

// floatSize is the size of f as encoding/json writes a float64: the shortest representation,
// in exponent form below 1e-6 and from 1e21 on, with a two-digit negative exponent shortened
// (1e-07 is written 1e-7).
func floatSize(buf []byte, f float64) int64 {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return 4 // encoding/json refuses them; count them as null
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b := strconv.AppendFloat(buf, f, format, -1, 64)
	n := len(b)
	if format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		n--
	}
	return int64(n)
}
