// Package informers shares dynamic informers among mapper-controller's controllers: one
// informer per GroupVersionResource in the process, started when a controller first asks for
// it (StatusCollectors and Placements name their resources at run time), as
// kube-controller-manager shares one informer factory among its controllers. Controllers that
// read only metadata (the placement of objects whose Placements do not divide replicas) ask
// for a metadata informer, whose watch carries PartialObjectMetadata instead of the whole
// object, as kube-controller-manager's garbage collector and namespace controller do; those
// that read a few fields of many objects (the dependency controller: the Pod templates'
// references) ask for a trimmed informer, whose transform drops the rest before the object is
// stored.
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
	dyn       dynamic.Interface
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
	// trimmed are the informers of trimmed objects (TrimmedInformer), by resource and trim,
	// and whether each was started.
	trimmed map[informerKey]*trimmedInformer
	// running counts the started trimmed informers until they stop (Shutdown).
	running sync.WaitGroup
}

// informerKey names one informer of a Set: of whole objects (full, trim empty), of trimmed
// objects (full, trim names the trim) or of metadata.
type informerKey struct {
	gvr  schema.GroupVersionResource
	full bool
	trim string
}

// trimmedInformer is one informer of TrimmedInformer.
type trimmedInformer struct {
	informer cache.SharedIndexInformer
	started  bool
}

// NewSet returns a Set over dyn and meta with no resync (handlers see changes only); meta may
// be nil when no controller of the process asks for a metadata informer. transform, when not
// nil, is every informer's transform (cache.SharedInformer.SetTransform), of dynamic and
// metadata informers alike: it may drop what no controller of the process reads, before the
// object is stored.
func NewSet(dyn dynamic.Interface, meta metadata.Interface, transform cache.TransformFunc) *Set {
	s := &Set{dyn: dyn, factory: dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0), transform: transform,
		full: map[schema.GroupVersionResource]bool{}, listErrors: map[informerKey]error{}, trimmed: map[informerKey]*trimmedInformer{}}
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
	for _, t := range s.trimmed {
		if !t.started {
			t.started = true
			s.running.Add(1)
			go func() {
				defer s.running.Done()
				t.informer.Run(s.stop)
			}()
		}
	}
}

// Informer returns the informer of gvr, creating it on first use (and starting it when the
// Set is started). It stores *unstructured.Unstructured objects; its indexer has the namespace
// index (cache.NamespaceIndex).
func (s *Set) Informer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	return s.prepare(informerKey{gvr: gvr, full: true}, s.factory.ForResource(gvr).Informer())
}

// Watches reports whether the Set has an informer of the whole objects of gvr: a controller
// that needs only metadata can use it instead of a second watch.
func (s *Set) Watches(gvr schema.GroupVersionResource) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.full[gvr]
}

// TrimmedInformer returns an informer of gvr whose objects are *unstructured.Unstructured
// passed through the Set's transform and then trim (a cache.TransformFunc that drops what
// the caller does not read), creating it on first use of gvr and name, which names trim (and
// starting it when the Set is started); its indexer has the namespace index. It is a watch of
// its own, apart from Informer's: for a controller that reads a few fields of many objects (a
// Pod template's references of every Deployment) when no controller of the process needs the
// whole objects. Its objects must never be written back. ListError(gvr, true) reports its
// list errors too.
func (s *Set) TrimmedInformer(gvr schema.GroupVersionResource, name string, trim cache.TransformFunc) cache.SharedIndexInformer {
	k := informerKey{gvr: gvr, full: true, trim: name}
	s.mu.Lock()
	if t, ok := s.trimmed[k]; ok {
		s.mu.Unlock()
		return t.informer
	}
	s.mu.Unlock()
	inf := dynamicinformer.NewFilteredDynamicInformer(s.dyn, gvr, "", 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil).Informer()
	transform := trim
	if s.transform != nil {
		transform = func(obj interface{}) (interface{}, error) {
			obj, err := s.transform(obj)
			if err != nil {
				return nil, err
			}
			return trim(obj)
		}
	}
	_ = inf.SetTransform(transform)
	s.mu.Lock()
	if t, ok := s.trimmed[k]; ok { // another caller made it meanwhile
		s.mu.Unlock()
		return t.informer
	}
	s.trimmed[k] = &trimmedInformer{informer: inf}
	s.mu.Unlock()
	// The error handler is the Set's; prepare starts it with the others.
	return s.prepareTrimmed(k, inf)
}

// ObjectInformer returns an informer the Set has of gvr whose objects are
// *unstructured.Unstructured with their whole metadata: the whole objects' (Informer), else a
// trimmed one (TrimmedInformer); false when it has neither. A controller that reads only
// metadata uses it instead of a watch of its own.
func (s *Set) ObjectInformer(gvr schema.GroupVersionResource) (cache.SharedIndexInformer, bool) {
	if s.Watches(gvr) {
		return s.Informer(gvr), true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, t := range s.trimmed {
		if k.gvr == gvr {
			return t.informer, true
		}
	}
	return nil, false
}

// ListError returns the last error of the list or watch of the informer of gvr (whole
// objects when full, metadata otherwise), nil when there was none. An informer that has not
// synced and whose list failed with 403 Forbidden or 404 Not Found will not sync until the
// permission or the resource comes.
func (s *Set) ListError(gvr schema.GroupVersionResource, full bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listErrors[informerKey{gvr: gvr, full: full}]
}

// MetadataInformer returns the metadata informer of gvr, creating it on first use (and
// starting it when the Set is started). It stores *metav1.PartialObjectMetadata objects
// (kube-apiserver's `as=PartialObjectMetadata` lists and watches); its indexer has the
// namespace index. It panics when the Set has no metadata client, a programming error.
func (s *Set) MetadataInformer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	if s.metadata == nil {
		panic("informers: MetadataInformer of a Set without a metadata client")
	}
	return s.prepare(informerKey{gvr: gvr}, s.metadata.ForResource(gvr).Informer())
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
	s.setErrorHandlerLocked(k, inf)
	s.startLocked()
	return inf
}

// prepareTrimmed sets the Set's error handler on inf, the trimmed informer k, and starts it
// when the Set is started.
func (s *Set) prepareTrimmed(k informerKey, inf cache.SharedIndexInformer) cache.SharedIndexInformer {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setErrorHandlerLocked(k, inf)
	s.startLocked()
	return inf
}

// setErrorHandlerLocked records the list and watch errors of inf, the informer k, for
// ListError (a trimmed informer's under its resource's whole-object key).
func (s *Set) setErrorHandlerLocked(k informerKey, inf cache.SharedIndexInformer) {
	recorded := informerKey{gvr: k.gvr, full: k.full}
	// Fails only once started, when the handler is already set.
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		s.mu.Lock()
		s.listErrors[recorded] = err
		s.mu.Unlock()
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
}

// Shutdown waits until every started informer has stopped; call it after the context given
// to Start has ended.
func (s *Set) Shutdown() {
	s.factory.Shutdown()
	if s.metadata != nil {
		s.metadata.Shutdown()
	}
	s.running.Wait()
}
