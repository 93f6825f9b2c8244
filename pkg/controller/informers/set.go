// Package informers shares dynamic informers among mapper-controller's controllers: one
// informer per GroupVersionResource in the process, started when a controller first asks for
// it (StatusCollectors and Placements name their resources at run time), as
// kube-controller-manager shares one informer factory among its controllers. Controllers that
// read only metadata (the placement of objects whose Placements do not divide replicas) ask
// for a metadata informer, whose watch carries PartialObjectMetadata instead of the whole
// object, as kube-controller-manager's garbage collector and namespace controller do.
package informers

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// Set is a process's dynamic and metadata informers over the source. Safe for concurrent
// use.
type Set struct {
	factory   dynamicinformer.DynamicSharedInformerFactory
	metadata  metadatainformer.SharedInformerFactory
	transform cache.TransformFunc

	mu   sync.Mutex
	stop <-chan struct{}
	// full are the resources of the informers of whole objects asked for so far.
	full map[schema.GroupVersionResource]bool
	// listErrors are the last list or watch error of each informer, by resource and whether
	// it holds whole objects.
	listErrors map[informerKey]error
}

// informerKey names one informer of a Set.
type informerKey struct {
	gvr  schema.GroupVersionResource
	full bool
}

// NewSet returns a Set over dyn and meta with no resync (handlers see changes only); meta may
// be nil when no controller of the process asks for a metadata informer. transform, when not
// nil, is every informer's transform (cache.SharedInformer.SetTransform), of dynamic and
// metadata informers alike: it may drop what no controller of the process reads, before the
// object is stored.
func NewSet(dyn dynamic.Interface, meta metadata.Interface, transform cache.TransformFunc) *Set {
	s := &Set{factory: dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0), transform: transform,
		full: map[schema.GroupVersionResource]bool{}, listErrors: map[informerKey]error{}}
	if meta != nil {
		s.metadata = metadatainformer.NewSharedInformerFactory(meta, 0)
	}
	return s
}

// Start starts the informers asked for so far, and from now on every new one as it is asked
// for, until ctx ends. Calling it again does nothing more.
func (s *Set) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop == nil {
		s.stop = ctx.Done()
	}
	s.startLocked()
}

// startLocked starts the informers not yet started, once Start was called.
func (s *Set) startLocked() {
	if s.stop == nil {
		return
	}
	s.factory.Start(s.stop)
	if s.metadata != nil {
		s.metadata.Start(s.stop)
	}
}

// Informer returns the informer of gvr, creating it on first use (and starting it when the
// Set is started). It stores *unstructured.Unstructured objects; its indexer has the namespace
// index (cache.NamespaceIndex).
func (s *Set) Informer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	return s.prepare(informerKey{gvr, true}, s.factory.ForResource(gvr).Informer())
}

// Watches reports whether the Set has an informer of the whole objects of gvr: a controller
// that needs only metadata can use it instead of a second watch.
func (s *Set) Watches(gvr schema.GroupVersionResource) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.full[gvr]
}

// ListError returns the last error of the list or watch of the informer of gvr (whole
// objects when full, metadata otherwise), nil when there was none. An informer that has not
// synced and whose list failed with 403 Forbidden or 404 Not Found will not sync until the
// permission or the resource comes.
func (s *Set) ListError(gvr schema.GroupVersionResource, full bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listErrors[informerKey{gvr, full}]
}

// MetadataInformer returns the metadata informer of gvr, creating it on first use (and
// starting it when the Set is started). It stores *metav1.PartialObjectMetadata objects
// (kube-apiserver's `as=PartialObjectMetadata` lists and watches); its indexer has the
// namespace index. It panics when the Set has no metadata client, a programming error.
func (s *Set) MetadataInformer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	if s.metadata == nil {
		panic("informers: MetadataInformer of a Set without a metadata client")
	}
	return s.prepare(informerKey{gvr, false}, s.metadata.ForResource(gvr).Informer())
}

// prepare sets the Set's transform and error handler on inf, the informer k, and starts it
// when the Set is started.
func (s *Set) prepare(k informerKey, inf cache.SharedIndexInformer) cache.SharedIndexInformer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k.full {
		s.full[k.gvr] = true
	}
	if s.transform != nil {
		// Fails only once the informer has started, when the transform is already set.
		_ = inf.SetTransform(s.transform)
	}
	// Also fails only once started, when the handler is already set.
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		s.mu.Lock()
		s.listErrors[k] = err
		s.mu.Unlock()
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	s.startLocked()
	return inf
}

// Shutdown waits until every started informer has stopped; call it after the context given
// to Start has ended.
func (s *Set) Shutdown() {
	s.factory.Shutdown()
	if s.metadata != nil {
		s.metadata.Shutdown()
	}
}
