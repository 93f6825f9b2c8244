package healthserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// freeAddress returns a loopback address with a port nobody listens on.
func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// get returns the status code of GET http://addr/path.
func get(t *testing.T, addr, path string) int {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s%s", addr, path))
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestServeProfiling checks that /debug/pprof is served only with profiling, and the health and
// metrics endpoints always.
func TestServeProfiling(t *testing.T) {
	for _, profiling := range []bool{false, true} {
		t.Run(fmt.Sprintf("profiling=%v", profiling), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addr := freeAddress(t)
			if err := Serve(ctx, addr, nil, nil, profiling); err != nil {
				t.Fatal(err)
			}
			for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
				if code := get(t, addr, path); code != http.StatusOK {
					t.Errorf("GET %s: %d, want 200", path, code)
				}
			}
			want := http.StatusNotFound
			if profiling {
				want = http.StatusOK
			}
			if code := get(t, addr, "/debug/pprof/goroutine?debug=1"); code != want {
				t.Errorf("GET /debug/pprof/goroutine: %d, want %d", code, want)
			}
		})
	}
}
