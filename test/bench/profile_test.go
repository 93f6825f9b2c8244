package bench

import (
	"math"
	"testing"
)

// TestCategorize checks the attribution of `go tool pprof -traces` samples: each sample counts
// once, for the first category in priority order that matches a function of its stack.
func TestCategorize(t *testing.T) {
	traces := `File: mapper-apiserver
Type: cpu
Duration: 5s, Total samples = 60ms ( 1.20%)
-----------+-------------------------------------------------------
      30ms   internal/runtime/syscall/linux.Syscall6
             syscall.write
             crypto/tls.(*Conn).write
             golang.org/x/net/http2.(*serverConn).serve
-----------+-------------------------------------------------------
      20ms   runtime.mallocgc
             sigs.k8s.io/json/internal/golang/encoding/json.(*decodeState).objectInterface
             k8s.io/client-go/tools/cache.(*Reflector).watch
-----------+-------------------------------------------------------
      10ms   main.main
             runtime.main
-----------+-------------------------------------------------------
`
	got := map[string]float64{}
	for _, c := range categorize([]byte(traces)) {
		got[c.Name] = c.Share
	}
	want := map[string]float64{"syscalls and network poller": 0.5, "JSON decoding": 1.0 / 3, "other": 1.0 / 6}
	for k, v := range want {
		if math.Abs(got[k]-v) > 1e-9 {
			t.Errorf("%s: share %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("categories %v, want %v", got, want)
	}
}
