// Package worker runs the reconcile loop that mapper-controller's controllers share: workers
// that take keys from a rate-limited workqueue and reconcile them, as client-go's controller
// example (k8s.io/client-go/examples/workqueue) and kube-controller-manager's controllers do.
package worker

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Run starts workers goroutines that take keys from queue and call reconcile for each, until
// ctx ends; then it shuts the queue down and returns once every worker has finished its
// current key. A key whose reconcile returns an error is logged with what (e.g. "the
// location") and re-added with the queue's rate limiter; a key reconciled without error is
// forgotten by the rate limiter. Keys are never reconciled concurrently (the workqueue's
// guarantee).
func Run(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], workers int, what string, reconcile func(context.Context, string) error) {
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for processNext(ctx, queue, what, reconcile) {
				}
			}, time.Second)
		}()
	}
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
}

// processNext reconciles one key; false once the queue is shut down.
func processNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], what string, reconcile func(context.Context, string) error) bool {
	key, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(key)
	if err := reconcile(ctx, key); err != nil {
		klog.FromContext(ctx).Info("Reconciling failed; retrying", "what", what, "key", key, "err", err)
		queue.AddRateLimited(key)
		return true
	}
	queue.Forget(key)
	return true
}
