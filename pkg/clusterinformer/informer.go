package clusterinformer

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// Options configure an Informer.
type Options struct {
	// Description names the informer in client-go's logs ("view configmaps", ...).
	Description string
	// Clusters says how an object's logical cluster is found (KeyFunc).
	Clusters Clusters
	// Transform, when set, replaces each object as it enters the queue (decoding it into a Go
	// type, dropping fields), as a SharedIndexInformer's SetTransform; the store and the
	// handler see its result. It must keep the object's metadata.
	Transform cache.TransformFunc
	// WatchErrorHandler, when set, is called when a list or watch fails, instead of client-go's
	// DefaultWatchErrorHandler (as a SharedIndexInformer's SetWatchErrorHandlerWithContext).
	WatchErrorHandler cache.WatchErrorHandlerWithContext
	// ObjectType is the type of the objects the ListWatch returns (client-go's reflector drops
	// watch events of another type); nil is *unstructured.Unstructured. A metadata ListWatch
	// (k8s.io/client-go/metadata) returns *metav1.PartialObjectMetadata.
	ObjectType runtime.Object
	// Indexers are the store's indexes (by the objects the store holds: Transform's results).
	Indexers cache.Indexers
}

// Informer is an informer on one resource whose store is keyed by contract.Key (see the
// package documentation). One Informer on the wildcard endpoint (or a view's all-clusters path)
// serves every logical cluster: one list and one watch on the server, and no need to discover
// the clusters first.
//
// Its handler is called from the informer's one goroutine, never concurrently, after the store
// has taken the change: OnAdd, OnUpdate(old, new), and OnDelete with the object or a
// cache.DeletedFinalStateUnknown (a deletion learnt by relisting). Unlike a
// SharedIndexInformer's, it is called while client-go's queue is locked: a handler must not
// wait for anything that calls HasSynced.
type Informer struct {
	store      cache.Indexer
	controller cache.Controller
	handler    cache.ResourceEventHandler
}

// NewForResource returns the Informer of resource gvr of client, all namespaces (as the
// client's base URL serves it: a kcp wildcard endpoint, a view's all-clusters path, a plain
// cluster), calling handler for every change. Run starts it.
func NewForResource(client dynamic.Interface, gvr schema.GroupVersionResource, handler cache.ResourceEventHandler, opts Options) *Informer {
	ri := client.Resource(gvr)
	if opts.Description == "" {
		opts.Description = gvr.String()
	}
	return New(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return ri.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return ri.Watch(ctx, o)
		},
	}, handler, opts)
}

// New returns the Informer of the objects lw lists and watches (*unstructured.Unstructured
// unless Options.ObjectType says otherwise), calling handler for every change. lw is used without streaming lists
// (WithoutStreamingLists). Run starts it.
func New(lw *cache.ListWatch, handler cache.ResourceEventHandler, opts Options) *Informer {
	keyFunc := KeyFunc(opts.Clusters)
	indexers := opts.Indexers
	if indexers == nil {
		indexers = cache.Indexers{}
	}
	store := cache.NewIndexer(keyFunc, indexers)
	objectType := opts.ObjectType
	if objectType == nil {
		objectType = &unstructured.Unstructured{}
	}
	fifo := cache.NewDeltaFIFOWithOptions(cache.DeltaFIFOOptions{
		KeyFunction: keyFunc, KnownObjects: store, EmitDeltaTypeReplaced: true, Transformer: opts.Transform,
	})
	inf := &Informer{store: store, handler: handler}
	inf.controller = cache.New(&cache.Config{
		Queue:                        fifo,
		ListerWatcher:                WithoutStreamingLists(lw),
		ObjectType:                   objectType,
		ObjectDescription:            opts.Description,
		Process:                      inf.process,
		WatchErrorHandlerWithContext: opts.WatchErrorHandler,
	})
	return inf
}

// process applies one object's deltas to the store and calls the handler, as client-go's
// shared informer does (processDeltas).
func (inf *Informer) process(obj interface{}, isInInitialList bool) error {
	deltas, ok := obj.(cache.Deltas)
	if !ok {
		return fmt.Errorf("unexpected queue item %T", obj)
	}
	for _, d := range deltas {
		switch d.Type {
		case cache.Sync, cache.Replaced, cache.Added, cache.Updated:
			if old, exists, err := inf.store.Get(d.Object); err == nil && exists {
				if err := inf.store.Update(d.Object); err != nil {
					return err
				}
				inf.handler.OnUpdate(old, d.Object)
			} else {
				if err := inf.store.Add(d.Object); err != nil {
					return err
				}
				inf.handler.OnAdd(d.Object, isInInitialList)
			}
		case cache.Deleted:
			if err := inf.store.Delete(d.Object); err != nil {
				return err
			}
			inf.handler.OnDelete(d.Object)
		}
	}
	return nil
}

// Run runs the informer until ctx ends.
func (inf *Informer) Run(ctx context.Context) { inf.controller.RunWithContext(ctx) }

// HasSynced reports whether the first list has been processed (its objects are in the store
// and the handler has seen them).
func (inf *Informer) HasSynced() bool { return inf.controller.HasSynced() }

// LastSyncResourceVersion returns the resourceVersion of the newest list or watch event the
// informer has taken ("" before the first list).
func (inf *Informer) LastSyncResourceVersion() string {
	return inf.controller.LastSyncResourceVersion()
}

// GetStore returns the store, keyed by contract.Key (KeyFunc). It holds the handler's objects:
// READ-ONLY.
func (inf *Informer) GetStore() cache.Store { return inf.store }

// GetIndexer returns the store with its indexes (Options.Indexers). READ-ONLY, as GetStore.
func (inf *Informer) GetIndexer() cache.Indexer { return inf.store }
