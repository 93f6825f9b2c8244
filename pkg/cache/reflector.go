package cache

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/cluster-mapper/cluster-mapper/pkg/clusterinformer"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// sourceBackoff paces the reflectors' retries of a failed list or watch of the source
// (client-go's ReflectorOptions.Backoff). client-go's default, 0.8 s doubling to 30 s with a
// jitter of 1.0 (up to 60 s), made views show a write 38 s after a restarted source was back.
// The source is the one server the cache depends on and a failed attempt costs it
// little (a refused connection, or a 4xx/429 it answers from memory), so retries start at
// 250 ms and double to at most 1 s (with the jitter of 0.5, at most 1.5 s): a source that is
// back is watched again within 1.5 s, or 3 s when the watch must fall back to a relist (410
// from the restarted source's watch cache, then one more delay before the list), and each
// down resource costs the source at most one attempt a second. (client-go resets the backoff
// after 2 minutes without failures.)
var sourceBackoff = wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 3, Cap: time.Second}

// startMirror creates the store of info and starts a client-go Reflector that lists and
// watches the resource on the source (all namespaces) and writes into the store, the way
// kube-apiserver's cacher feeds its watch cache.
func (c *Cache) startMirror(parent context.Context, info source.ResourceInfo) *mirror {
	store := NewResourceStore(info.GVR, info.GVK(), info.Namespaced, c.cfg.Store)
	store.rules.p.Store(&rulesHolder{rules: c.rules.load()})
	ctx, cancel := context.WithCancel(parent)
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := c.cfg.Source.List(ctx, info.GVR, opts)
			store.setSyncError(err)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := c.cfg.Source.Watch(ctx, info.GVR, opts)
			if err != nil && !store.HasSynced() {
				// A streaming list (sendInitialEvents) is the first sync's list.
				store.setSyncError(err)
			}
			return w, err
		},
	}
	// No expected type: the source hands *source.Object (its object client) or
	// *unstructured.Unstructured (a dynamic client), and the store accepts both (toVersion).
	// Streaming lists (WatchListClient) are used when the client supports them, like
	// informer factories decide, except on a source of several logical clusters: a streaming
	// list collects its objects under namespace/name keys before the store sees them, and would
	// keep one of the objects that share a namespace/name in several clusters
	// (clusterinformer.WithoutStreamingLists).
	lister := toolscache.ToListWatcherWithWatchListSemantics(lw, c.cfg.Source)
	if c.cfg.Store.ClusterFromAnnotation {
		lister = clusterinformer.WithoutStreamingLists(lw)
	}
	r := toolscache.NewReflectorWithOptions(lister, nil, store, toolscache.ReflectorOptions{
		Name:    "mapper-apiserver source " + info.GVR.String(),
		Backoff: &sourceBackoff,
	})
	m := &mirror{info: info, store: store, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		r.RunWithContext(ctx)
	}()
	return m
}
