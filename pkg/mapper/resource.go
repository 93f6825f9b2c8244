package mapper

import (
	"context"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/clusterinformer"
)

// resource is one mapped resource: the informer on the view, and, while the target serves
// the resource, the informer on the managed target objects (label contract.LocationLabel=<location>).
// A resource the target does not serve is halted: its objects wait, nothing is applied or
// deleted, until the target serves it.
type resource struct {
	gvr        schema.GroupVersionResource
	namespaced bool
	// projection is how its objects are written on the target (a ResourceMapping, or the
	// zero Projection); fixed for the resource's life (applyMappings restarts a resource
	// whose projection changes).
	projection Projection

	view       *clusterinformer.Informer
	viewCancel context.CancelFunc

	// halted is true until the target is known to serve the resource, and while it does not.
	halted atomic.Bool

	mu           sync.Mutex
	checked      bool                      // setServed has run once
	schema       SchemaState               // the last comparison of the schemas (checkSchemas)
	target       cache.SharedIndexInformer // nil while halted
	targetCancel context.CancelFunc
}

// name returns the GroupResource string used in logs and metric labels.
func (r *resource) name() string { return r.gvr.GroupResource().String() }

// targetGVR returns the resource the copies are written as on the target (Projection).
func (r *resource) targetGVR() schema.GroupVersionResource {
	return r.projection.TargetResource(r.gvr)
}

// servedState returns whether r is halted (the target does not serve it) and whether that is
// known yet (the target's discovery has been read for it).
func (r *resource) servedState() (halted, known bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.target == nil, r.checked
}

// schemaState returns the last comparison of r's schemas (checkSchemas).
func (r *resource) schemaState() SchemaState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.schema
}

// setSchema records the comparison of r's schemas and reports whether it changed.
func (r *resource) setSchema(s SchemaState) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	changed := r.schema != s
	r.schema = s
	return changed
}

// viewSynced reports whether the view informer has completed its initial list.
func (r *resource) viewSynced() bool { return r.view.HasSynced() }

// viewObject returns the view's object for key from the informer's store (keyed by
// contract.Key, so each logical cluster's object has its own entry), or nil when there is none.
func (r *resource) viewObject(key itemKey, _ string) *unstructured.Unstructured {
	obj, ok, err := r.view.GetStore().GetByKey(key.storeKey())
	if err != nil || !ok {
		return nil
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}

// targetInformer returns the informer on the managed target objects, nil while halted.
func (r *resource) targetInformer() cache.SharedIndexInformer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.target
}

// targetObject returns the managed target object namespace/name from the target informer's
// store, or nil when the informer is not running, not synced, or has no such object.
func (r *resource) targetObject(namespace, name string) *unstructured.Unstructured {
	inf := r.targetInformer()
	if inf == nil || !inf.HasSynced() {
		return nil
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	obj, ok, err := inf.GetStore().GetByKey(key)
	if err != nil || !ok {
		return nil
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}

// startResource starts mapping gvr, projected by p: a view informer whose events enqueue sync
// and status work. The target side starts when setServed reports the target serves the
// resource (p's target resource).
func (m *Mapper) startResource(ctx context.Context, gvr schema.GroupVersionResource, namespaced bool, p Projection) *resource {
	r := &resource{gvr: gvr, namespaced: namespaced, projection: p}
	r.halted.Store(true)
	r.view = newViewInformer(m.view, gvr, m.cfg.ClusterName, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { m.viewChanged(r, nil, obj) },
		UpdateFunc: func(old, obj interface{}) { m.viewChanged(r, old, obj) },
		DeleteFunc: func(obj interface{}) { m.viewDeleted(r, obj) },
	})
	vctx, cancel := context.WithCancel(ctx)
	r.viewCancel = cancel
	go r.view.Run(vctx)
	return r
}

// newViewInformer returns the informer of gvr on the view client, calling handler for every
// change. Its store is keyed by contract.Key (itemKey.storeKey), so that objects of two logical
// clusters with the same namespace/name are two entries; defaultCluster is the cluster of an
// object without kcp.io/cluster (views always set it). One informer on the view's all-clusters
// path per resource serves every cluster (clusterinformer.Informer).
func newViewInformer(view dynamic.Interface, gvr schema.GroupVersionResource, defaultCluster string, handler cache.ResourceEventHandler) *clusterinformer.Informer {
	return clusterinformer.NewForResource(view, gvr, handler, clusterinformer.Options{
		Description: "view " + gvr.String(),
		Clusters:    clusterinformer.Clusters{Default: defaultCluster},
	})
}

// viewChanged enqueues a view object after an add or update.
func (m *Mapper) viewChanged(r *resource, old, obj interface{}) { m.viewEvent(r, old, obj, false) }

// viewEvent enqueues a view object after an add, update or delete (deleted; obj may be a
// cache.DeletedFinalStateUnknown), and keeps its claim of a place (claimPlace).
func (m *Mapper) viewEvent(r *resource, old, obj interface{}, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	if o, ok := old.(*unstructured.Unstructured); ok && unchanged(o, u) {
		return // a resync or relist that changed nothing
	}
	key := keyOf(r.gvr, SourceOf(u, m.cfg.ClusterName))
	if r.projection.Naming != nil {
		m.claimPlace(r, key, u, deleted) // before the sync, which reads the claims
	}
	m.states.dirty(key)
	m.syncQueue.Add(key)
	if Reflects(u) {
		m.statusQueue.Add(key)
	}
}

// viewDeleted enqueues a view object after its deletion from the view (obj may be a
// cache.DeletedFinalStateUnknown) and drops its claim of a place.
func (m *Mapper) viewDeleted(r *resource, obj interface{}) { m.viewEvent(r, nil, obj, true) }

// claimPlace keeps the claim of key's view object u on its place (places.claim) for a
// resource whose ResourceMapping names the copies: an object that wants a copy claims its
// place, one that left the view (gone) or is deleting or not mapped claims none. When the
// object leaves a place, the objects waiting for it are synced again: one of them may now
// take it (places.winner).
func (m *Mapper) claimPlace(r *resource, key itemKey, u *unstructured.Unstructured, gone bool) {
	var left targetPlace
	var had bool
	if place, err := m.placeFor(context.Background(), r, key); err == nil && !gone && Mapped(u) && u.GetDeletionTimestamp() == nil {
		left, had = m.places.claim(place, key)
	} else {
		left, had = m.places.unclaim(key)
	}
	if had {
		for _, k := range m.places.freed(left) {
			m.syncQueue.Add(k)
		}
	}
}

// unchanged reports whether an update of the view informer delivers the object it held already
// (a resync, or a relist that found it as it was): the same resourceVersion and the same
// content. The resourceVersion alone does not say so: a view re-rendered when the source has no
// resourceVersion fresher than the store's shares the store's (docs/views.md, "Customizations
// and resourceVersions"), so an object may change in a view at the resourceVersion it was last
// shown at, for example shown deleting because the binding of its namespace to the location
// went while its last source write was the newest of the source. Skipping that update would
// leave the copy on the target and the location's finalizer on the source until the object's
// next change. Comparing the content costs one walk of each object an informer delivers
// unchanged, which happens on relists only.
func unchanged(old, obj *unstructured.Unstructured) bool {
	return old.GetResourceVersion() == obj.GetResourceVersion() && equality.Semantic.DeepEqual(old.Object, obj.Object)
}

// targetDeleted enqueues the sync of the source of a managed target object that was deleted
// (or lost the location label) on the target, so that the copy is made again while its
// source is in the view. After the mapper's own deletions the sync finds nothing to do.
func (m *Mapper) targetDeleted(r *resource, obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	if ref, _, ok := MarkedSource(u, m.cfg.Location, r.namespaced); ok && m.owns(ref) {
		key := keyOf(r.gvr, ref)
		m.states.dirty(key)
		m.syncQueue.Add(key)
		// The place is free for the objects that wait for it in conflict, unless the deleted
		// copy's own source is still in the view (then it takes its place back).
		if r.viewObject(key, m.cfg.ClusterName) == nil {
			for _, k := range m.places.freed(targetPlace{GVR: key.GVR, Namespace: u.GetNamespace(), Name: u.GetName()}) {
				m.syncQueue.Add(k)
			}
		}
	}
}

// setServed starts the target side of r when the target serves it, and halts r when it does
// not. Starting it enqueues every object of the view: none was mapped while r was halted.
func (m *Mapper) setServed(ctx context.Context, r *resource, served bool) {
	logger := klog.FromContext(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.checked && served == (r.target != nil) {
		return
	}
	r.checked = true
	if !served {
		if r.targetCancel != nil {
			r.targetCancel()
		}
		r.target, r.targetCancel = nil, nil
		r.halted.Store(true)
		m.metrics.resourceHalted(r.name()).Set(1)
		logger.Info("Halting the resource: the target does not serve it (is its CRD missing?); its objects wait until it does",
			"resource", r.name(), "groupVersion", r.gvr.GroupVersion().String(), "targetResource", r.targetGVR().String(), "blocked", r.projection.Blocked)
		// Objects synced before this first check were held without a reason (not known
		// yet): synced again, each is held with its outcome record (ResourceNotServed).
		// Nothing is written on the target (held).
		m.enqueueView(r)
		return
	}
	r.target = dynamicinformer.NewFilteredDynamicInformer(m.target, r.targetGVR(), metav1.NamespaceAll, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = listOptionsForLocation(m.cfg.Location).LabelSelector }).Informer()
	_, _ = r.target.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { m.targetChanged(r, nil, obj) },
		UpdateFunc: func(old, obj interface{}) { m.targetChanged(r, old, obj) },
		DeleteFunc: func(obj interface{}) { m.targetDeleted(r, obj) },
	})
	tctx, cancel := context.WithCancel(ctx)
	r.targetCancel = cancel
	go r.target.RunWithContext(tctx)
	r.halted.Store(false)
	m.metrics.resourceHalted(r.name()).Set(0)
	logger.V(2).Info("The target serves the resource", "resource", r.name())
	m.enqueueView(r)
}

// stop stops both informers of r and drops its series of the per-resource gauges in metrics
// (locationMetrics.deleteResource).
func (r *resource) stop(metrics locationMetrics) {
	r.viewCancel()
	metrics.deleteResource(r.name())
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.targetCancel != nil {
		r.targetCancel()
	}
}

// resource returns the mapped resource gvr, or nil.
func (m *Mapper) resource(gvr schema.GroupVersionResource) *resource {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.resources[gvr]
}

// resourceList returns the mapped resources.
func (m *Mapper) resourceList() []*resource {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*resource, 0, len(m.resources))
	for _, r := range m.resources {
		out = append(out, r)
	}
	return out
}

// stopResources stops every resource's informers.
func (m *Mapper) stopResources() {
	for _, r := range m.resourceList() {
		r.stop(m.metrics)
	}
}
