package source

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestResourceVersionBatching checks that concurrent callers share requests, and that a
// caller never gets the answer of a request that started before it called.
func TestResourceVersionBatching(t *testing.T) {
	var calls atomic.Int64
	release := make(chan struct{})
	started := make(chan struct{}, 3)
	var current atomic.Uint64
	b := &rvBatcher{fetch: func(ctx context.Context) (uint64, error) {
		calls.Add(1)
		started <- struct{}{}
		rv := current.Load() // the RV at the start of the request
		<-release
		return rv, nil
	}}
	current.Store(10)
	first := make(chan uint64)
	go func() { rv, _ := b.get(context.Background()); first <- rv }()
	<-started // the first request is in flight
	// A write happens at 11 after the first request started; later callers must see >= 11.
	current.Store(11)
	var wg sync.WaitGroup
	results := make([]uint64, 20)
	for i := range results {
		wg.Add(1)
		go func(i int) { defer wg.Done(); results[i], _ = b.get(context.Background()) }(i)
	}
	// Every caller waits for the queued request before the first ends (no sleep: under load
	// a goroutine can start late).
	deadline := time.Now().Add(10 * time.Second)
	for queued := 0; queued < len(results); {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d callers queued after 10s", queued, len(results))
		}
		b.mu.Lock()
		if b.next != nil {
			queued = b.next.callers
		}
		b.mu.Unlock()
		runtime.Gosched()
	}
	release <- struct{}{} // first request ends
	if rv := <-first; rv != 10 {
		t.Fatalf("first got %d", rv)
	}
	release <- struct{}{} // the shared second request ends
	wg.Wait()
	for i, rv := range results {
		if rv != 11 {
			t.Fatalf("caller %d got %d, want 11", i, rv)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
	// A caller whose context ends stops waiting.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.get(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	close(release)
}
