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
}

// NewSet returns a Set over dyn and meta with no resync (handlers see changes only); meta may
// be nil when no controller of the process asks for a metadata informer. transform, when not
// nil, is every informer's transform (cache.SharedInformer.SetTransform), of dynamic and
// metadata informers alike: it may drop what no controller of the process reads, before the
// object is stored.
func NewSet(dyn dynamic.Interface, meta metadata.Interface, transform cache.TransformFunc) *Set {
	s := &Set{factory: dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0), transform: transform}
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
	return s.prepare(s.factory.ForResource(gvr).Informer())
}

// MetadataInformer returns the metadata informer of gvr, creating it on first use (and
// starting it when the Set is started). It stores *metav1.PartialObjectMetadata objects
// (kube-apiserver's `as=PartialObjectMetadata` lists and watches); its indexer has the
// namespace index. It panics when the Set has no metadata client, a programming error.
func (s *Set) MetadataInformer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	if s.metadata == nil {
		panic("informers: MetadataInformer of a Set without a metadata client")
	}
	return s.prepare(s.metadata.ForResource(gvr).Informer())
}

// prepare sets the Set's transform on inf and starts it when the Set is started.
func (s *Set) prepare(inf cache.SharedIndexInformer) cache.SharedIndexInformer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.transform != nil {
		// Fails only once the informer has started, when the transform is already set.
		_ = inf.SetTransform(s.transform)
	}
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
