package worker

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Limit bounds how many calls of a controller are in flight at once, over all its workers:
// the writes of a round (one request each) run concurrently, so that a round of many objects
// is not bounded by one round trip per object, and never more than the limit at once, so
// that they stay a small share of the source's API Priority and Fairness seats.
type Limit struct {
	slots chan struct{}
}

// NewLimit returns a Limit of n calls at once (at least 1).
func NewLimit(n int) *Limit {
	return &Limit{slots: make(chan struct{}, max(n, 1))}
}

// Each calls do(i) for every i in [0, n), concurrently within the limit, and returns when
// every call has returned. Once ctx ends, the calls not yet started are not made: skipped(i,
// ctx.Err()) is called for each instead.
func (l *Limit) Each(ctx context.Context, n int, do func(i int), skipped func(i int, err error)) {
	var wg sync.WaitGroup
	for i := range n {
		select {
		case l.slots <- struct{}{}:
		case <-ctx.Done():
			skipped(i, ctx.Err())
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-l.slots }()
			do(i)
		}()
	}
	wg.Wait()
}

// Result names the outcome of a write for a controller's write metrics (their label
// "result"): Written, Conflict (409: someone else's field or a stale resourceVersion) or
// Error.
func Result(err error) string {
	switch {
	case err == nil:
		return "Written"
	case apierrors.IsConflict(err):
		return "Conflict"
	}
	return "Error"
}
