package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// leakScanner greps the raw bytes of every response a client receives (list and get bodies,
// status write answers, every watch frame as it arrives) for needles that must never appear
// in them: the names of other locations and markers from their status records (docs/design.md,
// "The location view": a view never shows another location). It wraps the client's transport
// (rest.Config's WrapTransport), so it sees exactly the bytes client-go decodes.
type leakScanner struct {
	owner   string
	needles [][]byte
	// allowedBefore: an occurrence right after this prefix is the test's own twin label
	// (e2e.kcp.io/loc-<location>, user data the test wrote to compare with a label-selector
	// list), not something the server revealed.
	allowedBefore []byte
	maxNeedle     int

	scanned atomic.Int64
	mu      sync.Mutex
	found   []string
}

func newLeakScanner(owner string, allowedBefore string, needles ...string) *leakScanner {
	s := &leakScanner{owner: owner, allowedBefore: []byte(allowedBefore)}
	for _, n := range needles {
		s.needles = append(s.needles, []byte(n))
		s.maxNeedle = max(s.maxNeedle, len(n))
	}
	return s
}

// wrap is a rest.Config WrapTransport.
func (s *leakScanner) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.Body != nil {
			resp.Body = &scanningBody{rc: resp.Body, s: s, what: req.Method + " " + req.URL.Path}
		}
		return resp, err
	})
}

// findings returns what was found (at most the first 20 occurrences).
func (s *leakScanner) findings() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.found...)
}

// scan looks for the needles in buf, of which the first carried bytes were already scanned as
// the tail of the previous read (matches entirely inside them are not reported again).
func (s *leakScanner) scan(buf []byte, carried int, what string) {
	for _, n := range s.needles {
		off := 0
		for {
			i := bytes.Index(buf[off:], n)
			if i < 0 {
				break
			}
			at := off + i
			off = at + 1
			if at+len(n) <= carried {
				continue
			}
			if at >= len(s.allowedBefore) && bytes.Equal(buf[at-len(s.allowedBefore):at], s.allowedBefore) {
				continue
			}
			from, to := max(0, at-80), min(len(buf), at+len(n)+80)
			s.mu.Lock()
			if len(s.found) < 20 {
				s.found = append(s.found, fmt.Sprintf("%s: %s shows %q: ...%s...", s.owner, what, n, buf[from:to]))
			}
			s.mu.Unlock()
		}
	}
}

// scanningBody scans a response body as it is read, keeping enough of the previous read to find
// needles that span two reads.
type scanningBody struct {
	rc   io.ReadCloser
	s    *leakScanner
	what string
	tail []byte
}

func (b *scanningBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		buf := append(append([]byte(nil), b.tail...), p[:n]...)
		b.s.scan(buf, len(b.tail), b.what)
		b.s.scanned.Add(int64(n))
		keep := min(len(buf), b.s.maxNeedle+len(b.s.allowedBefore))
		b.tail = append(b.tail[:0], buf[len(buf)-keep:]...)
	}
	return n, err
}

func (b *scanningBody) Close() error { return b.rc.Close() }
