package mapper

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// viewInformer is an informer on one resource of a location view whose store is keyed by
// contract.Key ("cluster|namespace/name"), so that objects of two logical clusters with the
// same namespace/name are two entries. client-go's SharedIndexInformer hard-codes
// MetaNamespaceKeyFunc, under which the second object would overwrite the first; this is
// client-go's own machinery (a Reflector feeding a DeltaFIFO, processed into an Indexer by a
// cache.Controller) with a cluster-aware key function in both the queue and the store.
//
// One informer (one list/watch of the view's all-clusters path) per resource serves every
// cluster; one informer set per cluster would open a watch per cluster and resource on the
// server and need the set of clusters to be discovered first.
type viewInformer struct {
	store      cache.Indexer
	controller cache.Controller
	handler    cache.ResourceEventHandler
}

// clusterKeyFunc returns the contract.Key of a view object (its cluster is the kcp.io/cluster
// annotation views always set, else defaultCluster). It accepts what a DeltaFIFO hands it,
// including cache.DeletedFinalStateUnknown (whose Key is already a contract.Key).
func clusterKeyFunc(defaultCluster string) cache.KeyFunc {
	return func(obj interface{}) (string, error) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			return d.Key, nil
		}
		if key, ok := obj.(cache.ExplicitKey); ok {
			return string(key), nil
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			// Read the annotation in place: GetAnnotations copies the whole map, on every key
			// computation of the queue and the store (BenchmarkViewStore).
			cluster, _, _ := unstructured.NestedString(u.Object, "metadata", "annotations", contract.ClusterAnnotation)
			if cluster == "" {
				cluster = defaultCluster
			}
			return string(contract.NewKey(cluster, u.GetNamespace(), u.GetName())), nil
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return "", fmt.Errorf("object has no meta: %v", err)
		}
		cluster := m.GetAnnotations()[contract.ClusterAnnotation]
		if cluster == "" {
			cluster = defaultCluster
		}
		return string(contract.NewKey(cluster, m.GetNamespace(), m.GetName())), nil
	}
}

// newViewInformer returns the informer of gvr on the view client, calling handler for every
// change (never concurrently). Run starts it.
func newViewInformer(view dynamic.Interface, gvr schema.GroupVersionResource, defaultCluster string, handler cache.ResourceEventHandler) *viewInformer {
	ri := view.Resource(gvr)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return ri.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return ri.Watch(ctx, opts)
		},
	}
	return newViewInformerFor(cache.ToListWatcherWithWatchListSemantics(lw, noStreamingLists{}), "view "+gvr.String(), defaultCluster, handler)
}

// noStreamingLists makes the reflector use paginated lists, never streaming lists
// (KEP-3157), whatever KUBE_FEATURE_WatchListClient says: a streaming list collects its
// initial events in a temporary store keyed by namespace/name (client-go's reflector
// hard-codes DeletionHandlingMetaNamespaceKeyFunc there), so objects of two logical clusters
// with the same namespace/name would overwrite each other before the cluster-keyed store
// sees them. A view serves lists from memory, so a paginated list costs it no more.
type noStreamingLists struct{}

// IsWatchListSemanticsUnSupported reports true: see noStreamingLists.
func (noStreamingLists) IsWatchListSemanticsUnSupported() bool { return true }

// newViewInformerFor returns the informer on lw (described as description in logs), calling
// handler for every change.
func newViewInformerFor(lw cache.ListerWatcher, description, defaultCluster string, handler cache.ResourceEventHandler) *viewInformer {
	keyFunc := clusterKeyFunc(defaultCluster)
	store := cache.NewIndexer(keyFunc, cache.Indexers{})
	fifo := cache.NewDeltaFIFOWithOptions(cache.DeltaFIFOOptions{KeyFunction: keyFunc, KnownObjects: store, EmitDeltaTypeReplaced: true})
	vi := &viewInformer{store: store, handler: handler}
	vi.controller = cache.New(&cache.Config{
		Queue:             fifo,
		ListerWatcher:     lw,
		ObjectType:        &unstructured.Unstructured{},
		ObjectDescription: description,
		Process:           vi.process,
	})
	return vi
}

// process applies one object's deltas to the store and calls the handler, as client-go's
// shared informer does (processDeltas).
func (vi *viewInformer) process(obj interface{}, isInInitialList bool) error {
	deltas, ok := obj.(cache.Deltas)
	if !ok {
		return fmt.Errorf("unexpected queue item %T", obj)
	}
	for _, d := range deltas {
		switch d.Type {
		case cache.Sync, cache.Replaced, cache.Added, cache.Updated:
			if old, exists, err := vi.store.Get(d.Object); err == nil && exists {
				if err := vi.store.Update(d.Object); err != nil {
					return err
				}
				vi.handler.OnUpdate(old, d.Object)
			} else {
				if err := vi.store.Add(d.Object); err != nil {
					return err
				}
				vi.handler.OnAdd(d.Object, isInInitialList)
			}
		case cache.Deleted:
			if err := vi.store.Delete(d.Object); err != nil {
				return err
			}
			vi.handler.OnDelete(d.Object)
		}
	}
	return nil
}

// RunWithContext runs the informer until ctx ends.
func (vi *viewInformer) RunWithContext(ctx context.Context) { vi.controller.RunWithContext(ctx) }

// HasSynced reports whether the initial list has been processed.
func (vi *viewInformer) HasSynced() bool { return vi.controller.HasSynced() }

// GetStore returns the store, keyed by contract.Key.
func (vi *viewInformer) GetStore() cache.Store { return vi.store }
