package source

import (
	"context"
	"sync"
	"time"
)

// sourceRequestTimeout bounds a shared resourceVersion request to the source.
const sourceRequestTimeout = 30 * time.Second

// rvBatcher batches resourceVersion reads: one request in flight; callers arriving meanwhile
// share the next request, which starts when the current one ends.
type rvBatcher struct {
	fetch func(context.Context) (uint64, error)

	mu       sync.Mutex
	inflight *rvCall
	next     *rvCall
}

// rvCall is one request to the source and the callers that share it.
type rvCall struct {
	done chan struct{}
	rv   uint64
	err  error
	// callers counts the get calls that wait for this request (guarded by rvBatcher.mu).
	callers int
}

func (b *rvBatcher) get(ctx context.Context) (uint64, error) {
	b.mu.Lock()
	var call *rvCall
	switch {
	case b.inflight == nil:
		call = &rvCall{done: make(chan struct{})}
		b.inflight = call
		go b.run(call)
	case b.next == nil:
		call = &rvCall{done: make(chan struct{})}
		b.next = call
	default:
		call = b.next
	}
	call.callers++
	b.mu.Unlock()
	select {
	case <-call.done:
		return call.rv, call.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// run performs call, then the queued call (if any), until none is left. The requests do not
// depend on any single caller's context (callers give up on their own).
func (b *rvBatcher) run(call *rvCall) {
	for call != nil {
		ctx, cancel := context.WithTimeout(context.Background(), sourceRequestTimeout)
		call.rv, call.err = b.fetch(ctx)
		cancel()
		close(call.done)
		b.mu.Lock()
		call = b.next
		b.next = nil
		b.inflight = call
		b.mu.Unlock()
	}
}
