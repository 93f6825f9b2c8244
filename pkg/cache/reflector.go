package cache

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// startMirror creates the store of info and starts a client-go Reflector that lists and
// watches the resource on the source (all namespaces) and writes into the store, the way
// kube-apiserver's cacher feeds its watch cache.
func (c *Cache) startMirror(parent context.Context, info ResourceInfo) *mirror {
	store := NewResourceStore(info.GVR, info.GVK(), info.Namespaced, c.cfg.Store)
	ctx, cancel := context.WithCancel(parent)
	ri := c.cfg.Dynamic.Resource(info.GVR)
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := ri.List(ctx, opts)
			store.setSyncError(err)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := ri.Watch(ctx, opts)
			if err != nil && !store.HasSynced() {
				// A streaming list (sendInitialEvents) is the first sync's list.
				store.setSyncError(err)
			}
			return w, err
		},
	}
	expected := &unstructured.Unstructured{}
	expected.SetGroupVersionKind(info.GVK())
	// Streaming lists (WatchListClient) are used when the client supports them, like
	// informer factories decide.
	r := toolscache.NewReflectorWithOptions(toolscache.ToListWatcherWithWatchListSemantics(lw, c.cfg.Dynamic), expected, store, toolscache.ReflectorOptions{
		Name: "mapper-apiserver source " + info.GVR.String(),
	})
	m := &mirror{info: info, store: store, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		r.RunWithContext(ctx)
	}()
	return m
}
