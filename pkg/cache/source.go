package cache

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// sourceRequestTimeout bounds a shared resourceVersion request to the source.
const sourceRequestTimeout = 30 * time.Second

// SourceResourceVersion returns the source's current resourceVersion for gvr, read with a
// `limit=1` LIST at resourceVersion "" (a consistent read on the source). The view waits until
// the store reached it (ResourceStore.WaitForResourceVersion) to serve consistent reads, like
// kube-apiserver's consistent reads from cache.
//
// Concurrent callers for the same gvr share requests, but a caller only joins a request that
// starts after it arrived (at most one request in flight and one queued per gvr), so the RV is
// never older than the caller's own call: read-your-writes holds. (singleflight would let a
// caller join a request started before a write the caller has just made.)
func (c *Cache) SourceResourceVersion(ctx context.Context, gvr schema.GroupVersionResource) (uint64, error) {
	c.rvMu.Lock()
	b := c.rvBatchers[gvr]
	if b == nil {
		b = &rvBatcher{fetch: func(ctx context.Context) (uint64, error) {
			list, err := c.cfg.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				return 0, err
			}
			rv, err := strconv.ParseUint(list.GetResourceVersion(), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("the source answered resourceVersion %q for %s: %v", list.GetResourceVersion(), gvr.GroupResource(), err)
			}
			return rv, nil
		}}
		c.rvBatchers[gvr] = b
	}
	c.rvMu.Unlock()
	return b.get(ctx)
}

// SourceGet reads namespace/name of gvr in the logical cluster cluster live from the source (a
// consistent GET, resourceVersion ""). namespace is "" for cluster-scoped resources. Errors are
// the source's API errors, or the error of building the cluster's client.
func (c *Cache) SourceGet(ctx context.Context, gvr schema.GroupVersionResource, cluster, namespace, name string) (*unstructured.Unstructured, error) {
	ri, err := c.SourceClusterResource(gvr, cluster, namespace)
	if err != nil {
		return nil, err
	}
	return ri.Get(ctx, name, metav1.GetOptions{})
}

// SourceClusterResource returns a client of gvr in namespace ("" for cluster-scoped resources)
// of one logical cluster of the source, with the server's own identity: on a kcp source its
// requests go to the cluster's own paths (Config.ClusterDynamic, /clusters/<cluster>/...); on
// a plain source, the one cluster, to the source itself. Views write status back and read
// objects by name through it.
func (c *Cache) SourceClusterResource(gvr schema.GroupVersionResource, cluster, namespace string) (dynamic.ResourceInterface, error) {
	d := c.cfg.Dynamic
	if c.cfg.ClusterDynamic != nil {
		var err error
		if d, err = c.cfg.ClusterDynamic(cluster); err != nil {
			return nil, err
		}
	}
	if namespace == "" {
		return d.Resource(gvr), nil
	}
	return d.Resource(gvr).Namespace(namespace), nil
}

// SourceResource returns a client of gvr on the source as configured (in namespace, "" for
// cluster-scoped resources or all namespaces), with the server's own identity. On a kcp source
// that is the wildcard endpoint, which serves lists and watches only: reads by name and
// writes use SourceClusterResource.
func (c *Cache) SourceResource(gvr schema.GroupVersionResource, namespace string) dynamic.ResourceInterface {
	if namespace == "" {
		return c.cfg.Dynamic.Resource(gvr)
	}
	return c.cfg.Dynamic.Resource(gvr).Namespace(namespace)
}

// rvBatcher batches resourceVersion reads: one request in flight; callers arriving meanwhile
// share the next request, which starts when the current one ends.
type rvBatcher struct {
	fetch func(context.Context) (uint64, error)

	mu       sync.Mutex
	inflight *rvCall
	next     *rvCall
}

type rvCall struct {
	done chan struct{}
	rv   uint64
	err  error
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
