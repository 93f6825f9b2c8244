package worker

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
)

// TestRunRetriesAndStops: a key whose reconcile fails is retried through the rate limiter
// until it succeeds, then forgotten; Run returns once its context ends and the queue is shut
// down.
func TestRunRetriesAndStops(t *testing.T) {
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond))
	var mu sync.Mutex
	calls := map[string]int{}
	done := make(chan struct{})
	reconcile := func(_ context.Context, key string) error {
		mu.Lock()
		defer mu.Unlock()
		calls[key]++
		if key == "flaky" && calls[key] < 3 {
			return errors.New("not yet")
		}
		if calls["flaky"] == 3 && calls["steady"] == 1 {
			close(done)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		Run(ctx, queue, 2, "the test key", reconcile)
	}()
	queue.Add("flaky")
	queue.Add("steady")
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("reconciles %v, want flaky 3 times and steady once", calls)
	}
	// The worker forgets the key right after reconcile returns.
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return queue.NumRequeues("flaky") == 0, nil
	}); err != nil {
		t.Fatalf("flaky has %d requeues after its success, want 0 (forgotten)", queue.NumRequeues("flaky"))
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if !queue.ShuttingDown() {
		t.Error("the queue was not shut down")
	}
}
