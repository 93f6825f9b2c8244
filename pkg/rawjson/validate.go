package rawjson

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// maxNesting is the deepest nesting Valid accepts, encoding/json's limit.
const maxNesting = 10000

// errTooDeep is Valid's error for text nested deeper than maxNesting.
var errTooDeep = errors.New("exceeded max depth")

// Valid returns nil when b is exactly one JSON value (surrounding whitespace allowed), and
// otherwise an error naming the offset, as encoding/json.Valid decides: it does not check
// that strings are valid UTF-8 (neither does encoding/json). Check also says how a
// decoder would see the text.
func Valid(b []byte) error {
	_, err := Check(b)
	return err
}

// Report says how kube-apiserver's decoder (sigs.k8s.io/json, non-strict, which client-go
// uses on responses too) would read JSON text that is valid (Check).
type Report struct {
	// Normalize says the decoder would not see the text as written: a string holds invalid
	// UTF-8 (read as U+FFFD) or an object has a member name twice (the last member counts).
	Normalize bool
	// BadNumber, when not nil, is the error of a number outside the range of a float64, which
	// the decoder refuses (an integer that does not fit an int64 is read as a float64).
	BadNumber error
	// Spaced says the text has whitespace outside strings: it is not compact.
	Spaced bool
}

// Check validates b as Valid does, in one pass, and reports how a decoder would read
// it (Report).
func Check(b []byte) (Report, error) {
	names := namesPool.Get().(*[][]byte)
	v := validator{b: b, names: (*names)[:0]}
	defer func() {
		clear(v.names[:cap(v.names)]) // keep no reference to b
		*names = v.names[:0]
		namesPool.Put(names)
	}()
	if err := v.value(); err != nil {
		return Report{}, err
	}
	if i := v.skipSpace(v.i); i != len(b) {
		return Report{}, v.invalid(i, "after top-level value")
	}
	return v.report, nil
}

// namesPool keeps the validator's slices of member names between checks: one per check would
// be garbage of every object the source sends.
var namesPool = sync.Pool{New: func() any {
	names := make([][]byte, 0, 64)
	return &names
}}

// validator checks JSON text by recursive descent.
type validator struct {
	b     []byte
	i     int
	depth int
	// names holds the member names (tokens, with quotes) of the objects being checked, the
	// innermost object's last, so that each object's names can be compared when it closes.
	names [][]byte
	// report is what the text holds that a decoder reads its own way.
	report Report
}

// invalid returns the error for the byte at i, or for the end of the text.
func (v *validator) invalid(i int, context string) error {
	if i >= len(v.b) {
		return ErrTruncated
	}
	return fmt.Errorf("invalid character %q %s at offset %d", v.b[i], context, i)
}

// skipSpace is SkipSpace on v.b, noting whitespace (Report.Spaced).
func (v *validator) skipSpace(i int) int {
	j := SkipSpace(v.b, i)
	if j != i {
		v.report.Spaced = true
	}
	return j
}

// value checks the value at or after v.i and moves v.i past it.
func (v *validator) value() error {
	v.i = v.skipSpace(v.i)
	if v.i >= len(v.b) {
		return ErrTruncated
	}
	switch c := v.b[v.i]; {
	case c == '{':
		return v.container('}')
	case c == '[':
		return v.container(']')
	case c == '"':
		return v.str()
	case c == '-' || c >= '0' && c <= '9':
		return v.number()
	case c == 't':
		return v.literal("true")
	case c == 'f':
		return v.literal("false")
	case c == 'n':
		return v.literal("null")
	default:
		return v.invalid(v.i, "looking for beginning of value")
	}
}

// container checks the object (closing '}') or array (closing ']') whose opening is at v.i.
func (v *validator) container(closing byte) error {
	if v.depth++; v.depth > maxNesting {
		return errTooDeep
	}
	v.i = v.skipSpace(v.i + 1)
	if v.i < len(v.b) && v.b[v.i] == closing {
		v.i++
		v.depth--
		return nil
	}
	base := len(v.names)
	for {
		if closing == '}' {
			v.i = v.skipSpace(v.i)
			if v.i >= len(v.b) || v.b[v.i] != '"' {
				return v.invalid(v.i, "looking for beginning of object key string")
			}
			start := v.i
			if err := v.str(); err != nil {
				return err
			}
			v.names = append(v.names, v.b[start:v.i])
			v.i = v.skipSpace(v.i)
			if v.i >= len(v.b) || v.b[v.i] != ':' {
				return v.invalid(v.i, "after object key")
			}
			v.i++
		}
		if err := v.value(); err != nil {
			return err
		}
		v.i = v.skipSpace(v.i)
		switch {
		case v.i >= len(v.b):
			return ErrTruncated
		case v.b[v.i] == ',':
			v.i++
		case v.b[v.i] == closing:
			v.i++
			v.depth--
			if closing == '}' {
				if !v.report.Normalize && duplicateNames(v.names[base:]) {
					v.report.Normalize = true
				}
				v.names = v.names[:base]
			}
			return nil
		default:
			return v.invalid(v.i, "after a value in an object or array")
		}
	}
}

// duplicateNames reports whether two of names (member name tokens of one object) may denote
// the same name: equal tokens, or any token with an escape (rare: a Kubernetes API server
// writes none in the names it uses; such an object is normalized, which is right whatever
// the names denote). It reorders names.
func duplicateNames(names [][]byte) bool {
	for _, n := range names {
		if bytes.IndexByte(n, '\\') >= 0 {
			return true
		}
	}
	if len(names) <= 8 {
		for i := range names {
			for j := i + 1; j < len(names); j++ {
				if bytes.Equal(names[i], names[j]) {
					return true
				}
			}
		}
		return false
	}
	slices.SortFunc(names, bytes.Compare)
	for i := 1; i < len(names); i++ {
		if bytes.Equal(names[i-1], names[i]) {
			return true
		}
	}
	return false
}

// str checks the string whose opening quote is at v.i, noting invalid UTF-8 in it.
func (v *validator) str() error {
	b := v.b
	for i := v.i + 1; i < len(b); i++ {
		for i < len(b) && b[i] >= 0x20 && b[i] < utf8.RuneSelf && b[i] != '"' && b[i] != '\\' {
			i++
		}
		if i >= len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			v.i = i + 1
			return nil
		case c < 0x20:
			return v.invalid(i, "in string literal")
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				v.report.Normalize = true
			}
			i += size - 1
		case c == '\\':
			i++
			if i >= len(b) {
				return ErrTruncated
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for k := 1; k <= 4; k++ {
					if i+k >= len(b) {
						return ErrTruncated
					}
					if !isHex(b[i+k]) {
						return v.invalid(i+k, "in \\u hexadecimal character escape")
					}
				}
				i += 4
			default:
				return v.invalid(i, "in string escape code")
			}
		}
	}
	return ErrTruncated
}

// maxPlainDigits is how many digits a number without an exponent may have and still be
// certainly inside the range of a float64 (about 1.8e308).
const maxPlainDigits = 300

// number checks the number at v.i: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, and notes
// one outside the range of a float64 (Report.BadNumber).
func (v *validator) number() error {
	b, i := v.b, v.i
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return ErrTruncated
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return v.invalid(i, "in numeric literal")
	}
	if i < len(b) && b[i] == '.' {
		if i++; i >= len(b) || !isDigit(b[i]) {
			return v.invalid(i, "after decimal point in numeric literal")
		}
		i = digits(b, i)
	}
	exponent := false
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return v.invalid(i, "in exponent of numeric literal")
		}
		i = digits(b, i)
		exponent = true
	}
	if (exponent || i-v.i > maxPlainDigits) && v.report.BadNumber == nil {
		// As encoding/json and sigs.k8s.io/json decide: strconv.ParseFloat's range error.
		if _, err := strconv.ParseFloat(string(b[v.i:i]), 64); err != nil {
			v.report.BadNumber = fmt.Errorf("the number %s at offset %d is out of the range of a 64-bit float", contract.Truncate(string(b[v.i:i]), 40), v.i)
		}
	}
	v.i = i
	return nil
}

// literal checks that the literal word (true, false or null) is at v.i.
func (v *validator) literal(word string) error {
	for k := 0; k < len(word); k++ {
		if v.i+k >= len(v.b) {
			return ErrTruncated
		}
		if v.b[v.i+k] != word[k] {
			return v.invalid(v.i+k, "in literal "+word)
		}
	}
	v.i += len(word)
	return nil
}

// digits returns the index of the first byte at or after i that is not a decimal digit.
func digits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
