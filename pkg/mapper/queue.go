package mapper

import (
	"time"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
)

// itemKey identifies a source object in the mapper's work queues: its resource (as the view
// serves it), logical cluster, namespace and name. The cluster is part of the key because the
// target location of an object depends on it (prefixed namespace mapping) and must be known
// after the object has left the view.
type itemKey struct {
	GVR       schema.GroupVersionResource
	Cluster   string
	Namespace string
	Name      string
}

// source returns the key's SourceRef.
func (k itemKey) source() SourceRef {
	return SourceRef{Cluster: k.Cluster, Namespace: k.Namespace, Name: k.Name}
}

// storeKey returns the key of the object in the view informer's store, its contract.Key
// ("cluster|namespace/name", see newViewInformer).
func (k itemKey) storeKey() string {
	return string(contract.NewKey(k.Cluster, k.Namespace, k.Name))
}

// keyOf returns the itemKey of a view object of resource gvr.
func keyOf(gvr schema.GroupVersionResource, ref SourceRef) itemKey {
	return itemKey{GVR: gvr, Cluster: ref.Cluster, Namespace: ref.Namespace, Name: ref.Name}
}

// newQueue returns a rate-limited work queue named name (the "name" label of client-go's
// workqueue_* metrics). A failing item is retried after baseDelay·2^failures, at most
// maxDelay; all retries together are limited to 10 per second with a burst of 100, as
// client-go's default controller rate limiter does.
func newQueue(name string, baseDelay, maxDelay time.Duration) workqueue.TypedRateLimitingInterface[itemKey] {
	limiter := workqueue.NewTypedMaxOfRateLimiter[itemKey](
		workqueue.NewTypedItemExponentialFailureRateLimiter[itemKey](baseDelay, maxDelay),
		&workqueue.TypedBucketRateLimiter[itemKey]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
	return workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[itemKey]{Name: name})
}
