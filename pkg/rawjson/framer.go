package rawjson

import (
	"bytes"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
)

// Framer is the runtime.Framer of a stream of JSON objects (the object client's watch streams,
// pkg/source objectSerializer): it cuts the stream into JSON objects, one watch event each, as
// apimachinery's JSON framer (k8s.io/apimachinery/pkg/util/framer.NewJSONFramedReader, the
// json serializer's Framer) does. A frame is not validated: the caller validates what it keeps
// (Check). A stream that holds something other than objects between them is an error.
var Framer runtime.Framer = watchFramer{}

// watchFramer is Framer.
//
// apimachinery's framer reads each frame with encoding/json's Decoder, whose scanner calls a
// state function per byte: 5% of mapper-apiserver's CPU while it followed the source's
// writes to 10 resources (bench scenario 2, `jsonFrameReader.Read`), for frames that the
// JSON walker then reads again. This framer finds a frame's end by tracking strings and
// nesting only. It does not validate the frame: what the object client keeps of it, the
// event's object, is validated once by pkg/source's DecodeObject (Check, what encoding/json's scanner
// checks), so that one object that does not decode is skipped (Object.DecodeError) instead
// of failing the stream, which the reflector would then restart at the same event forever.
// The envelope around the object is read by the walker, which reports malformed text.
type watchFramer struct{}

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
			f.start = SkipSpace(f.buf, f.start)
			f.scan = f.start
			if f.start < len(f.buf) && f.buf[f.start] != '{' {
				return nil, fmt.Errorf("cannot frame the watch stream: expected a JSON object, found %q", f.buf[f.start])
			}
		}
		if f.start < len(f.buf) {
			if end, ok := f.state.find(f.buf, f.scan); ok {
				frame := f.buf[f.start:end]
				f.start, f.scan, f.state = end, end, endState{}
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
// b ends first (s then holds where it stopped). Only strings and nesting are tracked: the
// event's object is validated when it is decoded (pkg/source's DecodeObject).
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
