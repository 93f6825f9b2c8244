package cache

import (
	"runtime"
	"testing"
	"time"
)

func runtime_NumGoroutine() int { return runtime.NumGoroutine() }

// waitGoroutines waits until the number of goroutines is back to base (goleak is not in the
// module graph).
func waitGoroutines(t testing.TB, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= base {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines, want <= %d:\n%s", n, base, buf)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
