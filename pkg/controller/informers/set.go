// Package informers shares dynamic informers among mapper-controller's controllers: one
// informer per GroupVersionResource in the process, started when a controller first asks for
// it (StatusCollectors and Placements name their resources at run time), as
// kube-controller-manager shares one informer factory among its controllers.
package informers

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// Set is a process's dynamic informers over the source. Safe for concurrent use.
type Set struct {
	factory   dynamicinformer.DynamicSharedInformerFactory
	transform cache.TransformFunc

	mu   sync.Mutex
	stop <-chan struct{}
}

// NewSet returns a Set over dyn with no resync (handlers see changes only). transform, when
// not nil, is every informer's transform (cache.SharedInformer.SetTransform): it may drop what
// no controller of the process reads, before the object is stored.
func NewSet(dyn dynamic.Interface, transform cache.TransformFunc) *Set {
	return &Set{factory: dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0), transform: transform}
}

// Start starts the informers asked for so far, and from now on every new one as it is asked
// for, until ctx ends. Calling it again does nothing more.
func (s *Set) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop == nil {
		s.stop = ctx.Done()
	}
	s.factory.Start(s.stop)
}

// Informer returns the informer of gvr, creating it on first use (and starting it when the
// Set is started). Its indexer has the namespace index (cache.NamespaceIndex).
func (s *Set) Informer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	inf := s.factory.ForResource(gvr).Informer()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.transform != nil {
		// Fails only once the informer has started, when the transform is already set.
		_ = inf.SetTransform(s.transform)
	}
	if s.stop != nil {
		s.factory.Start(s.stop)
	}
	return inf
}

// Shutdown waits until every started informer has stopped; call it after the context given
// to Start has ended.
func (s *Set) Shutdown() { s.factory.Shutdown() }
