package mapper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/clusterinformer"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// Intervals of the related copies' loop.
const (
	// relatedRefreshInterval is how often the loop reads the ResourceMappings of the view for
	// changed related entries (new informers, every main object enqueued again).
	relatedRefreshInterval = 2 * time.Second
	// relatedResyncInterval is how often every main object is enqueued again, whatever
	// happened (a missed event costs at most this long).
	relatedResyncInterval = time.Minute
)

// Index names of the related loop's informers.
const (
	// relatedBySource indexes the main objects' copies on the target by their source
	// (contract.Key of the Source*Annotations).
	relatedBySource = "source"
	// relatedByOwner indexes the related copies of the view by mapping and main object
	// (relatedKey.String).
	relatedByOwner = "owner"
)

// relatedKey is the work item of the related loop: one main source object and one
// ResourceMapping (by name, contract.RelatedMappingAnnotation).
type relatedKey struct {
	Mapping   string
	Cluster   string
	Namespace string
	Name      string
}

// String returns "mapping|cluster|namespace/name", the relatedByOwner index value.
func (k relatedKey) String() string {
	return k.Mapping + "|" + string(contract.NewKey(k.Cluster, k.Namespace, k.Name))
}

func (k relatedKey) source() SourceRef {
	return SourceRef{Cluster: k.Cluster, Namespace: k.Namespace, Name: k.Name}
}

// relatedCopies keeps, for every ResourceMapping of the location with related entries of origin
// Target, a related copy in the source of each related object the target holds for a main
// object's copy (docs/resourcemapping.md, "Related objects: origin Target"): informers on the
// main objects' copies and on the related objects of the target, an informer on the location's
// own related copies in the view (label contract.RelatedLocationLabel=<location>), and a work
// queue of relatedKeys whose worker writes the copies through the view (planRelated decides).
type relatedCopies struct {
	m     *Mapper
	queue workqueue.TypedRateLimitingInterface[relatedKey]

	mu sync.RWMutex
	// mappings are the compiled mappings by name, and versions the resourceVersion each was
	// compiled from.
	mappings map[string]*relatedMapping
	versions map[string]string
	// copies, related and views are the informers, by resource: the main objects' copies on the
	// target (location label), the related objects on the target (all), and the location's
	// related copies in the view.
	copies  map[schema.GroupVersionResource]cache.SharedIndexInformer
	related map[schema.GroupVersionResource]cache.SharedIndexInformer
	views   map[schema.GroupVersionResource]*clusterinformer.Informer
}

func newRelatedCopies(m *Mapper) *relatedCopies {
	return &relatedCopies{
		m:        m,
		queue:    newRelatedQueue(m.cfg.RetryBaseDelay, m.cfg.RetryMaxDelay),
		mappings: map[string]*relatedMapping{},
		versions: map[string]string{},
		copies:   map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		related:  map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		views:    map[schema.GroupVersionResource]*clusterinformer.Informer{},
	}
}

// newRelatedQueue returns the related loop's rate-limited queue ("mapper_related"), with the
// backoff of newQueue.
func newRelatedQueue(baseDelay, maxDelay time.Duration) workqueue.TypedRateLimitingInterface[relatedKey] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[relatedKey](baseDelay, maxDelay),
		workqueue.TypedRateLimitingQueueConfig[relatedKey]{Name: "mapper_related"})
}

// run refreshes the mappings and runs workers until ctx ends.
func (rc *relatedCopies) run(ctx context.Context, workers int) {
	defer rc.queue.ShutDown()
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rc.processNext(ctx) {
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		wait.UntilWithContext(ctx, rc.refresh, relatedRefreshInterval)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		wait.UntilWithContext(ctx, func(context.Context) { rc.enqueueAll() }, relatedResyncInterval)
	}()
	<-ctx.Done()
	rc.queue.ShutDown()
	wg.Wait()
}

// refresh compiles the mappings of the view that changed, starts the informers their entries
// need, and enqueues every main object when a mapping changed or went.
func (rc *relatedCopies) refresh(ctx context.Context) {
	rc.m.mappings.mu.RLock()
	inf, verdicts := rc.m.mappings.informer, rc.m.mappings.verdicts
	rc.m.mappings.mu.RUnlock()
	if inf == nil || !inf.HasSynced() {
		return
	}
	seen := map[string]bool{}
	changed := false
	for _, o := range inf.GetStore().List() {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		key := string(contract.NewKey(SourceOf(u, rc.m.cfg.ClusterName).Cluster, "", u.GetName()))
		accepted := verdicts[key].Accepted
		version := u.GetResourceVersion() + fmt.Sprint(accepted)
		seen[u.GetName()] = true
		rc.mu.RLock()
		same := rc.versions[u.GetName()] == version
		rc.mu.RUnlock()
		if same {
			continue
		}
		rm := compileRelatedMapping(u, accepted)
		if rm.Err != nil {
			klog.FromContext(ctx).Info("A ResourceMapping's related entries cannot be used; nothing of it is brought up or deleted until it is fixed", "mapping", u.GetName(), "err", rm.Err.Error())
		}
		// Stored before its informers start, so that their first events find it.
		rc.mu.Lock()
		rc.mappings[u.GetName()], rc.versions[u.GetName()] = rm, version
		rc.mu.Unlock()
		for _, e := range rm.Entries {
			rc.ensureInformers(ctx, e)
		}
		changed = true
	}
	rc.mu.Lock()
	for name := range rc.mappings {
		if !seen[name] {
			delete(rc.mappings, name)
			delete(rc.versions, name)
			changed = true
		}
	}
	rc.mu.Unlock()
	if changed {
		rc.enqueueAll()
	}
}

// ensureInformers starts the informers entry e needs, once per resource: they run until the
// mapper stops.
func (rc *relatedCopies) ensureInformers(ctx context.Context, e *relatedEntry) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	loc := rc.m.cfg.Location
	if rc.copies[e.CopyResource] == nil {
		gvr := e.CopyResource
		inf := dynamicinformer.NewFilteredDynamicInformer(rc.m.target, gvr, metav1.NamespaceAll, 0,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, relatedBySource: rc.sourceIndex},
			func(o *metav1.ListOptions) { o.LabelSelector = listOptionsForLocation(loc).LabelSelector }).Informer()
		_, _ = inf.AddEventHandler(rc.handler(func(u *unstructured.Unstructured) { rc.copyChanged(gvr, u) }))
		rc.copies[gvr] = inf
		go inf.RunWithContext(ctx)
	}
	if rc.related[e.Resource] == nil {
		gvr := e.Resource
		inf := dynamicinformer.NewFilteredDynamicInformer(rc.m.target, gvr, metav1.NamespaceAll, 0,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil).Informer()
		_, _ = inf.AddEventHandler(rc.handler(func(u *unstructured.Unstructured) { rc.relatedChanged(gvr, u) }))
		rc.related[gvr] = inf
		go inf.RunWithContext(ctx)
	}
	if rc.views[e.Resource] == nil {
		res := rc.m.view.Resource(e.Resource)
		selector := contract.RelatedLocationLabel + "=" + loc
		inf := clusterinformer.New(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.LabelSelector = selector
				return res.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.LabelSelector = selector
				return res.Watch(ctx, o)
			},
		}, rc.handler(rc.relatedCopyChanged), clusterinformer.Options{
			Description: "view related copies " + e.Resource.String(),
			Clusters:    clusterinformer.Clusters{Default: rc.m.cfg.ClusterName},
			Indexers:    cache.Indexers{relatedByOwner: rc.ownerIndex},
		})
		rc.views[e.Resource] = inf
		go inf.Run(ctx)
	}
}

// handler calls fn with the object of every add, update and delete.
func (rc *relatedCopies) handler(fn func(*unstructured.Unstructured)) cache.ResourceEventHandler {
	call := func(obj interface{}) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			fn(u)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    call,
		UpdateFunc: func(_, obj interface{}) { call(obj) },
		DeleteFunc: call,
	}
}

// sourceIndex indexes a main object's copy by its source.
func (rc *relatedCopies) sourceIndex(obj interface{}) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	ref, _, ok := MarkedSource(u, rc.m.cfg.Location, true)
	if !ok {
		return nil, nil
	}
	return []string{ref.String()}, nil
}

// ownerIndex indexes a related copy of the view by its relatedKey.
func (rc *relatedCopies) ownerIndex(obj interface{}) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	k, ok := rc.ownerKey(u)
	if !ok {
		return nil, nil
	}
	return []string{k.String()}, nil
}

// ownerKey returns the relatedKey of a related copy of the view: its mapping annotation, and
// the main object its ownerReference with the owner-uid label's UID names, in the copy's
// cluster and namespace.
func (rc *relatedCopies) ownerKey(u *unstructured.Unstructured) (relatedKey, bool) {
	mapping := u.GetAnnotations()[contract.RelatedMappingAnnotation]
	uid := u.GetLabels()[contract.RelatedOwnerUIDLabel]
	if mapping == "" || uid == "" {
		return relatedKey{}, false
	}
	for _, ref := range u.GetOwnerReferences() {
		if string(ref.UID) == uid {
			src := SourceOf(u, rc.m.cfg.ClusterName)
			return relatedKey{Mapping: mapping, Cluster: src.Cluster, Namespace: src.Namespace, Name: ref.Name}, true
		}
	}
	return relatedKey{}, false
}

// copyChanged enqueues the main object of a copy on the target, for each mapping whose
// entries bring objects up for copies of resource gvr.
func (rc *relatedCopies) copyChanged(gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	ref, _, ok := MarkedSource(u, rc.m.cfg.Location, true)
	if !ok || !rc.m.owns(ref) {
		return
	}
	for _, name := range rc.mappingsOf(func(e *relatedEntry) bool { return e.CopyResource == gvr }) {
		rc.queue.Add(relatedKey{Mapping: name, Cluster: ref.Cluster, Namespace: ref.Namespace, Name: ref.Name})
	}
}

// relatedChanged enqueues the main objects of the copies in the namespace of a related target
// object of resource gvr that changed.
func (rc *relatedCopies) relatedChanged(gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	rc.mu.RLock()
	defer rc.mu.RUnlock()
	for name, rm := range rc.mappings {
		for _, e := range rm.Entries {
			if e.Resource != gvr || rc.copies[e.CopyResource] == nil {
				continue
			}
			objs, _ := rc.copies[e.CopyResource].GetIndexer().ByIndex(cache.NamespaceIndex, u.GetNamespace())
			for _, o := range objs {
				if c, ok := o.(*unstructured.Unstructured); ok {
					if ref, _, ok := MarkedSource(c, rc.m.cfg.Location, true); ok && rc.m.owns(ref) {
						rc.queue.Add(relatedKey{Mapping: name, Cluster: ref.Cluster, Namespace: ref.Namespace, Name: ref.Name})
					}
				}
			}
		}
	}
}

// relatedCopyChanged enqueues the main object of a related copy of the view.
func (rc *relatedCopies) relatedCopyChanged(u *unstructured.Unstructured) {
	if k, ok := rc.ownerKey(u); ok && rc.m.owns(k.source()) {
		rc.queue.Add(k)
	}
}

// mappingsOf returns the names of the mappings with an entry for which match is true.
func (rc *relatedCopies) mappingsOf(match func(*relatedEntry) bool) []string {
	rc.mu.RLock()
	defer rc.mu.RUnlock()
	var out []string
	for name, rm := range rc.mappings {
		for _, e := range rm.Entries {
			if match(e) {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

// enqueueAll enqueues every main object with a copy on the target and every main object a
// related copy of the view names.
func (rc *relatedCopies) enqueueAll() {
	rc.mu.RLock()
	copies := make(map[schema.GroupVersionResource]cache.SharedIndexInformer, len(rc.copies))
	for gvr, inf := range rc.copies {
		copies[gvr] = inf
	}
	views := make([]*clusterinformer.Informer, 0, len(rc.views))
	for _, inf := range rc.views {
		views = append(views, inf)
	}
	rc.mu.RUnlock()
	for gvr, inf := range copies {
		for _, o := range inf.GetStore().List() {
			if u, ok := o.(*unstructured.Unstructured); ok {
				rc.copyChanged(gvr, u)
			}
		}
	}
	for _, inf := range views {
		for _, o := range inf.GetStore().List() {
			if u, ok := o.(*unstructured.Unstructured); ok {
				rc.relatedCopyChanged(u)
			}
		}
	}
}

// processNext takes one key from the queue and reconciles it; it returns false once the
// queue is shut down.
func (rc *relatedCopies) processNext(ctx context.Context) bool {
	key, shutdown := rc.queue.Get()
	if shutdown {
		return false
	}
	defer rc.queue.Done(key)
	err := rc.reconcile(ctx, key)
	switch {
	case err == nil:
		rc.queue.Forget(key)
	case errors.Is(err, errRequeue):
		rc.queue.AddAfter(key, requeueDelay)
	default:
		klog.FromContext(ctx).V(2).Info("Keeping the related copies of an object in step failed; retrying with backoff", "mapping", key.Mapping, "source", key.source().String(), "err", err.Error())
		rc.queue.AddRateLimited(key)
	}
	return true
}

// reconcile reads what planRelated decides from, from synced informers only (errRequeue until
// they are), and carries the plan out through the view.
func (rc *relatedCopies) reconcile(ctx context.Context, key relatedKey) error {
	m := rc.m
	if m.pause.current().Paused {
		return errRequeue // a paused location changes nothing
	}
	m.mappings.mu.RLock()
	mappingsInf := m.mappings.informer
	m.mappings.mu.RUnlock()
	if mappingsInf == nil || !mappingsInf.HasSynced() {
		return errRequeue
	}
	rc.mu.RLock()
	rm := rc.mappings[key.Mapping]
	rc.mu.RUnlock()
	if rm == nil && mappingNamed(mappingsInf.GetStore(), key.Mapping) {
		// In the view but not compiled yet (refresh has not run since it came): not gone.
		return errRequeue
	}
	rc.mu.RLock()
	var existing []relatedObject
	viewsSynced := true
	for gvr, inf := range rc.views {
		if !inf.HasSynced() {
			viewsSynced = false
			continue
		}
		objs, _ := inf.GetIndexer().ByIndex(relatedByOwner, key.String())
		for _, o := range objs {
			if u, ok := o.(*unstructured.Unstructured); ok {
				existing = append(existing, relatedObject{Resource: gvr, Obj: u})
			}
		}
	}
	rc.mu.RUnlock()
	if !viewsSynced {
		return errRequeue
	}
	in := relatedInputs{Location: m.cfg.Location, Mapping: rm, Existing: existing}
	if rm != nil && rm.Accepted && rm.Err == nil && len(rm.Entries) > 0 {
		if err := rc.readMain(ctx, key, rm.Entries[0], &in); err != nil {
			return err
		}
	}
	plan := planRelated(ctx, in, rc.listRelated)
	for _, err := range plan.Errors {
		klog.FromContext(ctx).Info("A related entry cannot be evaluated for an object; its related copies are left as they are", "mapping", key.Mapping, "source", key.source().String(), "err", err.Error())
	}
	var failed error
	for _, d := range plan.Deletes {
		// Precondition (planRelated): d.Reason names the synced fact that says the copy must
		// go; the delete carries the copy's UID, so a copy made again meanwhile is not hit.
		if err := rc.delete(ctx, key, d); err != nil {
			failed = err
		}
	}
	for _, w := range plan.Writes {
		if err := rc.write(ctx, key, w); err != nil {
			failed = err
		}
	}
	if failed == nil && plan.Wait {
		return errRequeue
	}
	return failed
}

// readMain fills in the main object, its state in the view and its copy on the target, for
// planRelated, from entry e's resources. It returns errRequeue while an informer has not
// synced or the view has not yet shown an object it holds.
func (rc *relatedCopies) readMain(ctx context.Context, key relatedKey, e *relatedEntry, in *relatedInputs) error {
	m := rc.m
	var r *resource
	for _, res := range m.resourceList() {
		if res.gvr.GroupResource() == e.Source.GroupResource() {
			r = res
		}
	}
	if r == nil {
		return fmt.Errorf("the main resource %s is not mapped", e.Source.GroupResource())
	}
	if !r.viewSynced() {
		return errRequeue
	}
	in.Main = r.viewObject(keyOf(r.gvr, key.source()), m.cfg.ClusterName)
	if in.Main == nil {
		gone, err := m.goneFromView(ctx, r, keyOf(r.gvr, key.source()))
		if err != nil {
			return err
		}
		in.MainGone = gone
		return nil
	}
	in.Releasing = m.releasing(in.Main)
	rc.mu.RLock()
	copies := rc.copies[e.CopyResource]
	rc.mu.RUnlock()
	if copies == nil || !copies.HasSynced() {
		return errRequeue
	}
	objs, _ := copies.GetIndexer().ByIndex(relatedBySource, key.source().String())
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			in.Copy = u
		}
	}
	return nil
}

// listRelated is planRelated's relatedLister over the related target informers.
func (rc *relatedCopies) listRelated(gvr schema.GroupVersionResource, ns string) ([]*unstructured.Unstructured, bool) {
	rc.mu.RLock()
	inf := rc.related[gvr]
	rc.mu.RUnlock()
	if inf == nil || !inf.HasSynced() {
		return nil, false
	}
	objs, _ := inf.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
	}
	return out, true
}

// write creates or updates a related copy through the view path of the main object's cluster.
func (rc *relatedCopies) write(ctx context.Context, key relatedKey, w relatedWrite) error {
	m := rc.m
	view, err := m.clusterViews.For(key.Cluster)
	if err != nil {
		return err
	}
	client := view.Resource(w.Resource).Namespace(w.Desired.GetNamespace())
	op := "create"
	if w.Existing == nil {
		_, err = client.Create(ctx, w.Desired, metav1.CreateOptions{FieldManager: m.cfg.FieldManager})
	} else {
		op = "update"
		_, err = client.Update(ctx, relatedUpdate(w.Existing, w.Desired), metav1.UpdateOptions{FieldManager: m.cfg.FieldManager})
	}
	if err != nil {
		m.metrics.relatedWrites(w.Resource.GroupResource().String(), op, "error").Inc()
		if apierrors.IsAlreadyExists(err) {
			// Another object of that name (not one of this location's related copies for the
			// main object): never overwritten.
			klog.FromContext(ctx).Info("Cannot bring a related object up: an object of its copy's name exists in the source", "mapping", key.Mapping, "source", key.source().String(), "name", w.Desired.GetName())
		}
		return fmt.Errorf("%s of related copy %s %s/%s through the view: %w", op, w.Resource.GroupResource(), w.Desired.GetNamespace(), w.Desired.GetName(), err)
	}
	m.metrics.relatedWrites(w.Resource.GroupResource().String(), op, "success").Inc()
	klog.FromContext(ctx).V(2).Info("Wrote a related copy through the view", "operation", op, "resource", w.Resource.GroupResource().String(), "namespace", w.Desired.GetNamespace(), "name", w.Desired.GetName(), "source", key.source().String())
	return nil
}

// delete deletes a related copy through the view, with its UID as precondition.
func (rc *relatedCopies) delete(ctx context.Context, key relatedKey, d relatedDelete) error {
	m := rc.m
	view, err := m.clusterViews.For(key.Cluster)
	if err != nil {
		return err
	}
	uid := d.Obj.GetUID()
	err = view.Resource(d.Resource).Namespace(d.Obj.GetNamespace()).Delete(ctx, d.Obj.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		m.metrics.relatedWrites(d.Resource.GroupResource().String(), "delete", "error").Inc()
		return fmt.Errorf("deleting related copy %s %s/%s through the view: %w", d.Resource.GroupResource(), d.Obj.GetNamespace(), d.Obj.GetName(), err)
	}
	m.metrics.relatedWrites(d.Resource.GroupResource().String(), "delete", "success").Inc()
	klog.FromContext(ctx).Info("Deleted a related copy", "resource", d.Resource.GroupResource().String(), "namespace", d.Obj.GetNamespace(), "name", d.Obj.GetName(), "source", key.source().String(), "reason", d.Reason)
	return nil
}

// relatedWorkers is the number of concurrent reconciles of related copies: a few, their
// writes are one request each through the view.
const relatedWorkers = 2

// mappingNamed reports whether store, the view's ResourceMappings, holds a mapping named name
// (in any logical cluster).
func mappingNamed(store cache.Store, name string) bool {
	for _, o := range store.List() {
		if u, ok := o.(*unstructured.Unstructured); ok && u.GetName() == name {
			return true
		}
	}
	return false
}
