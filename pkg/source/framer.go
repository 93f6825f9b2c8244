package source

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
)

// watchFramer is the object client's runtime.Framer for watch streams (objectSerializer): it
// cuts the stream into JSON objects, one watch event each, as apimachinery's JSON framer
// (k8s.io/apimachinery/pkg/util/framer.NewJSONFramedReader) does, and validates each one.
//
// apimachinery's framer reads each frame with encoding/json's Decoder, whose scanner calls a
// state function per byte: 5% of mapper-apiserver's CPU while it followed the source's
// writes to 10 resources (bench scenario 2, `jsonFrameReader.Read`), for frames that the
// JSON walker then reads again. This framer finds a frame's end by tracking strings and
// nesting, then validates it once with validJSON, which checks what encoding/json's scanner
// checks (grammar, string escapes and control characters, numbers, literals, nesting depth)
// in plain loops. The walker (jsonwalk.go) and the views rely on that validation: the
// cached bytes are written to clients as they are.
type watchFramer struct{}

var _ runtime.Framer = watchFramer{}

// NewFrameReader returns a reader whose every Read returns one JSON object of r, or the next
// part of it with io.ErrShortBuffer when data is too small, as the streaming decoder of
// k8s.io/apimachinery expects.
func (watchFramer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &frameReader{r: r, buf: make([]byte, 0, 32*1024)}
}

// NewFrameWriter returns w: JSON values need no framing on write.
func (watchFramer) NewFrameWriter(w io.Writer) io.Writer { return w }

// frameReader is a watchFramer's reader.
type frameReader struct {
	r io.ReadCloser
	// buf holds read bytes; buf[start:] are not yet returned.
	buf   []byte
	start int
	// scan is where the search for the current frame's end goes on, and end its state.
	scan  int
	state endState
	// remaining is the rest of a frame that did not fit the last Read's data; it points into
	// buf, which is not read into again before remaining is returned.
	remaining []byte
	// err is the error of the underlying reader, returned once buf holds no whole frame.
	err error
}

// Read implements io.Reader (NewFrameReader).
func (f *frameReader) Read(data []byte) (int, error) {
	if len(f.remaining) > 0 {
		n := copy(data, f.remaining)
		f.remaining = f.remaining[n:]
		if len(f.remaining) > 0 {
			return n, io.ErrShortBuffer
		}
		return n, nil
	}
	frame, err := f.next()
	if err != nil {
		return 0, err
	}
	n := copy(data, frame)
	if n < len(frame) {
		f.remaining = frame[n:]
		return n, io.ErrShortBuffer
	}
	return n, nil
}

// Close implements io.Closer: it closes the underlying reader.
func (f *frameReader) Close() error { return f.r.Close() }

// next returns the next frame, a slice of buf valid until the next call.
func (f *frameReader) next() ([]byte, error) {
	for {
		if f.state.depth == 0 && !f.state.started {
			// Before a frame: skip whitespace, and the frame begins at the first other byte.
			f.start = skipSpace(f.buf, f.start)
			f.scan = f.start
			if f.start < len(f.buf) && f.buf[f.start] != '{' {
				return nil, fmt.Errorf("cannot frame the watch stream: expected a JSON object, found %q", f.buf[f.start])
			}
		}
		if f.start < len(f.buf) {
			if end, ok := f.state.find(f.buf, f.scan); ok {
				frame := f.buf[f.start:end]
				f.start, f.scan, f.state = end, end, endState{}
				if err := validJSON(frame); err != nil {
					return nil, fmt.Errorf("cannot frame the watch stream: %w", err)
				}
				return frame, nil
			}
			f.scan = len(f.buf)
		}
		if f.err != nil {
			if f.start < len(f.buf) && f.err == io.EOF {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, f.err
		}
		f.fill()
	}
}

// fill reads more of the stream into buf, first dropping what was returned (buf is reused
// in place) and growing buf when a frame fills it.
func (f *frameReader) fill() {
	if f.start > 0 {
		n := copy(f.buf, f.buf[f.start:])
		f.scan -= f.start
		f.buf, f.start = f.buf[:n], 0
	}
	if len(f.buf) == cap(f.buf) {
		grown := make([]byte, len(f.buf), 2*cap(f.buf))
		copy(grown, f.buf)
		f.buf = grown
	}
	n, err := f.r.Read(f.buf[len(f.buf):cap(f.buf)])
	f.buf = f.buf[:len(f.buf)+n]
	if err != nil {
		f.err = err
	}
}

// endState is where a search for the end of a JSON object stopped when the bytes ran out.
type endState struct {
	started  bool
	depth    int
	inString bool
	escaped  bool
	// escapes says the current string has an escape before its end.
	escapes bool
}

// find continues the search for the end of the object that starts at the first byte it is
// given, from b[i]; it returns the index just after the object's closing brace, or false when
// b ends first (s then holds where it stopped). Only strings and nesting are tracked: a frame
// is validated once whole (validJSON).
func (s *endState) find(b []byte, i int) (int, bool) {
	for ; i < len(b); i++ {
		c := b[i]
		if s.inString {
			switch {
			case s.escaped:
				s.escaped = false
			case c == '\\':
				s.escaped, s.escapes = true, true
			case c == '"':
				s.inString, s.escapes = false, false
			case !s.escapes:
				// Jump to the string's next quote when no escape comes before it. A string with
				// an escape is read byte by byte from there on, so that each byte is looked at
				// a bounded number of times.
				if q := bytes.IndexByte(b[i:], '"'); q > 0 {
					if bytes.IndexByte(b[i:i+q], '\\') < 0 {
						i += q
						s.inString = false
					} else {
						s.escapes = true
					}
				}
			}
			continue
		}
		switch c {
		case '"':
			s.inString = true
		case '{', '[':
			s.started = true
			s.depth++
		case '}', ']':
			s.depth--
			if s.depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}

// maxNesting is the deepest nesting validJSON accepts, encoding/json's limit.
const maxNesting = 10000

// errTooDeep is validJSON's error for text nested deeper than maxNesting.
var errTooDeep = errors.New("exceeded max depth")

// validJSON returns nil when b is exactly one JSON value (surrounding whitespace allowed), and
// otherwise an error naming the offset, as encoding/json.Valid decides: it does not check
// that strings are valid UTF-8 (neither does encoding/json).
func validJSON(b []byte) error {
	v := validator{b: b}
	if err := v.value(); err != nil {
		return err
	}
	if i := skipSpace(b, v.i); i != len(b) {
		return v.invalid(i, "after top-level value")
	}
	return nil
}

// validator checks JSON text by recursive descent.
type validator struct {
	b     []byte
	i     int
	depth int
}

// invalid returns the error for the byte at i, or for the end of the text.
func (v *validator) invalid(i int, context string) error {
	if i >= len(v.b) {
		return errTruncated
	}
	return fmt.Errorf("invalid character %q %s at offset %d", v.b[i], context, i)
}

// value checks the value at or after v.i and moves v.i past it.
func (v *validator) value() error {
	v.i = skipSpace(v.b, v.i)
	if v.i >= len(v.b) {
		return errTruncated
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
	v.i = skipSpace(v.b, v.i+1)
	if v.i < len(v.b) && v.b[v.i] == closing {
		v.i++
		v.depth--
		return nil
	}
	for {
		if closing == '}' {
			v.i = skipSpace(v.b, v.i)
			if v.i >= len(v.b) || v.b[v.i] != '"' {
				return v.invalid(v.i, "looking for beginning of object key string")
			}
			if err := v.str(); err != nil {
				return err
			}
			v.i = skipSpace(v.b, v.i)
			if v.i >= len(v.b) || v.b[v.i] != ':' {
				return v.invalid(v.i, "after object key")
			}
			v.i++
		}
		if err := v.value(); err != nil {
			return err
		}
		v.i = skipSpace(v.b, v.i)
		switch {
		case v.i >= len(v.b):
			return errTruncated
		case v.b[v.i] == ',':
			v.i++
		case v.b[v.i] == closing:
			v.i++
			v.depth--
			return nil
		default:
			return v.invalid(v.i, "after a value in an object or array")
		}
	}
}

// str checks the string whose opening quote is at v.i.
func (v *validator) str() error {
	b := v.b
	for i := v.i + 1; i < len(b); i++ {
		for i < len(b) && b[i] >= 0x20 && b[i] != '"' && b[i] != '\\' {
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
		case c == '\\':
			i++
			if i >= len(b) {
				return errTruncated
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for k := 1; k <= 4; k++ {
					if i+k >= len(b) {
						return errTruncated
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
	return errTruncated
}

// number checks the number at v.i: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (v *validator) number() error {
	b, i := v.b, v.i
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return errTruncated
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
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return v.invalid(i, "in exponent of numeric literal")
		}
		i = digits(b, i)
	}
	v.i = i
	return nil
}

// literal checks that the literal word (true, false or null) is at v.i.
func (v *validator) literal(word string) error {
	for k := 0; k < len(word); k++ {
		if v.i+k >= len(v.b) {
			return errTruncated
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
