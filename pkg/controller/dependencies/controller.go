package dependencies

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/informers"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/pending"
	ctrlplacement "github.com/cluster-mapper/cluster-mapper/pkg/controller/placement"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/served"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/worker"
	"github.com/cluster-mapper/cluster-mapper/pkg/dependencies"
	"github.com/cluster-mapper/cluster-mapper/pkg/placement"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
)

// RuleResource is the GroupVersionResource of DependencyRules.
var RuleResource = controlv1alpha1.SchemeGroupVersion.WithResource("dependencyrules")

// FieldManager is the field manager of the dependency controller's writes.
const FieldManager = "mapper-controller-dependencies"

// LocationsAnnotation records, on a dependency, the locations of its kcp.io/assigned-locations
// that the dependency controller added (a JSON array, sorted): the others are someone else's.
const LocationsAnnotation = "control.mapper.kcp.io/dependency-locations"

// DefaultConcurrentWrites is the default of Config.ConcurrentWrites (as the placement
// controller's).
const DefaultConcurrentWrites = ctrlplacement.DefaultConcurrentWrites

// Config configures a Controller.
type Config struct {
	// Dynamic is the source's client: Placements' and DependencyRules' statuses.
	Dynamic dynamic.Interface
	// Metadata is the source's metadata client: the patches of dependencies' annotations.
	Metadata metadata.Interface
	// Informers are the process's shared informers over the source; they need a metadata
	// client, and their transform must keep this FieldManager's managedFields.
	Informers *informers.Set
	// Resolver says which resources the source serves, and their versions.
	Resolver *served.Resolver
	// Workers is the number of namespaces reconciled at once; default 2.
	Workers int
	// ConcurrentWrites is the number of patches in flight at once, over all workers; default
	// DefaultConcurrentWrites.
	ConcurrentWrites int
	// Recorder records Events on referencing objects (a reference to an object that does not
	// exist); optional.
	Recorder events.EventRecorder
	// RuleStatusInterval is how often DependencyRules' statuses are brought up to date;
	// default 2s.
	RuleStatusInterval time.Duration
}

// Controller assigns what assigned objects reference to their locations.
type Controller struct {
	dyn       dynamic.Interface
	metadata  metadata.Interface
	informers *informers.Set
	resolver  *served.Resolver
	recorder  events.EventRecorder
	workers   int
	interval  time.Duration
	queue     workqueue.TypedRateLimitingInterface[string]
	limit     *worker.Limit
	// applyWrite writes one apply to the source; tests replace it.
	applyWrite func(ctx context.Context, w *write) error
	// pending are the writes the informers have not delivered yet.
	pending *pending.Writes

	placements, targets, rules toolscache.SharedIndexInformer
	// mappings are the ResourceMappings: their entries of origin Source (mappings.go).
	mappings toolscache.SharedIndexInformer
	// locations are the SyncTargets as placement reads them: what their views mirror.
	locations *ctrlplacement.Locations

	mu sync.Mutex
	// handled are the informers that have this controller's event handler.
	handled sets.Set[informerKey]
	// fixed are the informers of the built-in kinds, once resolved (resolveFixed).
	fixed *fixedInformers
	// extra are the metadata informers of other referenced resources, by group resource.
	extra map[schema.GroupResource]watched
	// compiled are the DependencyRules compiled, by name.
	compiled map[string]compiledRule
	// compiledMappings are the entries of origin Source of ResourceMappings compiled, by name.
	compiledMappings map[string]compiledMapping
	// memo are the references of referencing objects, by uid (see references).
	memo map[types.UID]*memoEntry
	// parsed are the selectors and targets of Services, HPAs and PDBs, by uid.
	parsed *dependencies.SelectorCache
	// reported are the missing references already recorded as Events, by namespace key
	// ("<uid>/<resource>/<name>").
	reported map[string]sets.Set[string]
	// ruleFailures are the evaluation failures of each DependencyRule, by rule name (of each
	// ResourceMapping: by mappingFailureKey) and namespace key, then "namespace/name" of the
	// object.
	ruleFailures map[string]map[string]map[string]string
}

// informerKey names an informer: whole objects, trimmed objects (full and trimmed) or
// metadata.
type informerKey struct {
	gvr           schema.GroupVersionResource
	full, trimmed bool
}

// content is what an informer of this controller holds of each object.
type content int

const (
	// metadataOnly: the metadata (PartialObjectMetadata), of a referenced object.
	metadataOnly content = iota
	// trimmed: the metadata and the fields dependencies.Trim keeps, of a workload, Service,
	// HPA or PDB.
	trimmed
	// whole: the whole object, of a resource a DependencyRule's expression reads.
	whole
)

// watched is an informer of one resource, with the resource's kind.
type watched struct {
	gvr      schema.GroupVersionResource
	gvk      schema.GroupVersionKind
	informer toolscache.SharedIndexInformer
}

// fixedInformers are the informers of the kinds that need no DependencyRule: those holding
// Pod templates (whole objects), those selecting or targeting workloads (whole objects) and
// those Pod templates reference (metadata), each only when the source serves it.
type fixedInformers struct {
	templates            []watched
	services, hpas, pdbs *watched
	// deps are the informers of the referenced resources, by group resource.
	deps map[schema.GroupResource]watched
}

// all returns every fixed informer.
func (f *fixedInformers) all() []watched {
	out := append([]watched{}, f.templates...)
	for _, w := range f.deps {
		out = append(out, w)
	}
	return out
}

// New returns a Controller; Run starts it.
func New(cfg Config) *Controller {
	registerMetrics()
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.ConcurrentWrites <= 0 {
		cfg.ConcurrentWrites = DefaultConcurrentWrites
	}
	if cfg.RuleStatusInterval <= 0 {
		cfg.RuleStatusInterval = 2 * time.Second
	}
	c := &Controller{
		dyn: cfg.Dynamic, metadata: cfg.Metadata, informers: cfg.Informers, resolver: cfg.Resolver, recorder: cfg.Recorder,
		workers: cfg.Workers, interval: cfg.RuleStatusInterval, limit: worker.NewLimit(cfg.ConcurrentWrites), pending: pending.New(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "dependencies"}),
		placements:       cfg.Informers.Informer(ctrlplacement.Resource),
		targets:          cfg.Informers.Informer(synctarget.Resource),
		rules:            cfg.Informers.Informer(RuleResource),
		mappings:         cfg.Informers.Informer(MappingResource),
		handled:          sets.New[informerKey](),
		extra:            map[schema.GroupResource]watched{},
		compiled:         map[string]compiledRule{},
		compiledMappings: map[string]compiledMapping{},
		memo:             map[types.UID]*memoEntry{},
		parsed:           dependencies.NewSelectorCache(),
		reported:         map[string]sets.Set[string]{},
		ruleFailures:     map[string]map[string]map[string]string{},
	}
	c.applyWrite = c.apply
	// The placement controller writes a Placement's status as its objects are placed; of a
	// Placement a round reads only what placementRead returns.
	placementEvents := c.namespaceEvents()
	placementEvents.UpdateFunc = func(old, obj interface{}) {
		if placementRead(old) != placementRead(obj) {
			c.enqueueObject(obj, false)
		}
	}
	_, _ = c.placements.AddEventHandler(placementEvents)
	// A rule's change changes the references of every object of its resource.
	_, _ = c.rules.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueRuleObjects,
		UpdateFunc: func(_, obj interface{}) { c.enqueueRuleObjects(obj) },
		DeleteFunc: c.enqueueRuleObjects,
	})
	// A mapping's change (its spec, its locations) changes the related objects of every
	// object of its source resource; its status (written by the mappers and this controller)
	// changes nothing.
	_, _ = c.mappings.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueMappingObjects,
		UpdateFunc: func(old, obj interface{}) {
			if mappingRead(old) != mappingRead(obj) {
				c.enqueueMappingObjects(old)
				c.enqueueMappingObjects(obj)
			}
		},
		DeleteFunc: c.enqueueMappingObjects,
	})
	// What the views mirror (a SyncTarget's status.resources) changes the Placements'
	// reports only.
	c.locations = ctrlplacement.NewLocations(c.targets, func(old, new *placement.Location) {
		if new != nil && (old == nil || !old.Resources.Equal(new.Resources)) {
			c.enqueuePlacementNamespaces()
		}
	})
	return c
}

// Run runs the informers, the workers and the DependencyRules' status writer until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.informers.Start(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), c.placements.HasSynced, c.targets.HasSynced) {
		return
	}
	// Resolve the built-in kinds now, so that their informers' first lists queue every
	// namespace holding a workload.
	if err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		err := c.resolveFixed()
		if err != nil {
			klog.FromContext(ctx).Info("Cannot read the source's discovery for the dependency controller; retrying", "err", err)
		}
		return err == nil, nil
	}); err != nil {
		return
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		c.writeRuleStatuses(ctx)
		c.writeMappingStatuses(ctx)
	}, c.interval)
	worker.Run(ctx, c.queue, c.workers, "the dependencies of a namespace", c.reconcile)
}

// resolveFixed starts the informers of the built-in kinds the source serves. It returns an
// error when discovery cannot be read (a resource the source does not serve is left out).
func (c *Controller) resolveFixed() error {
	f := &fixedInformers{deps: map[schema.GroupResource]watched{}}
	// resolve returns the informer of gvr, or false when the source does not serve it.
	resolve := func(gvr schema.GroupVersionResource, want content) (watched, bool, error) {
		gvk, err := c.resolver.Kind(gvr)
		if served.IsNotServed(err) {
			return watched{}, false, nil
		}
		if err != nil {
			return watched{}, false, err
		}
		return watched{gvr, gvk, c.watch(gvr, want)}, true, nil
	}
	for _, gvr := range dependencies.TemplateResources() {
		w, ok, err := resolve(gvr, trimmed)
		if err != nil {
			return err
		}
		if ok {
			f.templates = append(f.templates, w)
		}
	}
	for _, s := range []struct {
		gvr schema.GroupVersionResource
		to  **watched
	}{{dependencies.ServicesV1, &f.services}, {dependencies.HorizontalPodAutoscalersV2, &f.hpas}, {dependencies.PodDisruptionBudgetsV1, &f.pdbs}} {
		w, ok, err := resolve(s.gvr, trimmed)
		if err != nil {
			return err
		}
		if ok {
			*s.to = &w
			f.deps[s.gvr.GroupResource()] = w
		}
	}
	for _, gr := range []schema.GroupResource{dependencies.ConfigMaps, dependencies.Secrets, dependencies.ServiceAccounts, dependencies.PersistentVolumeClaims} {
		w, ok, err := resolve(gr.WithVersion("v1"), metadataOnly)
		if err != nil {
			return err
		}
		if ok {
			f.deps[gr] = w
		}
	}
	c.mu.Lock()
	c.fixed = f
	c.mu.Unlock()
	return nil
}

// fixedInformers returns the fixed informers, nil before resolveFixed succeeded.
func (c *Controller) fixedInformers() *fixedInformers {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fixed
}

// watch returns the informer of gvr holding want of each object, with this controller's
// event handler added once: the whole objects when another controller watches them whole
// already (one watch of the source instead of two), whatever want is; else the trimmed
// objects (dependencies.Trim: a Deployment's Pod template without its images, commands and
// probes, a Service without its ports; a fraction of the memory of the whole objects) or the
// metadata.
func (c *Controller) watch(gvr schema.GroupVersionResource, want content) toolscache.SharedIndexInformer {
	if c.informers.Watches(gvr) {
		want = whole
	}
	var informer toolscache.SharedIndexInformer
	switch want {
	case whole:
		informer = c.informers.Informer(gvr)
	case trimmed:
		informer = c.informers.TrimmedInformer(gvr, FieldManager, dependencies.Trim(gvr))
	default:
		informer = c.informers.MetadataInformer(gvr)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if k := (informerKey{gvr, want != metadataOnly, want == trimmed}); !c.handled.Has(k) {
		c.handled.Insert(k)
		_, _ = informer.AddEventHandler(c.namespaceEvents())
	}
	return informer
}

// dependencyInformer returns the informer of the objects of gr that references name: a fixed
// one, or a metadata informer of the version the source prefers, started on first use. It
// returns a *served.NotServedError when the source does not serve gr.
func (c *Controller) dependencyInformer(f *fixedInformers, gr schema.GroupResource) (watched, error) {
	if w, ok := f.deps[gr]; ok {
		return w, nil
	}
	c.mu.Lock()
	w, ok := c.extra[gr]
	c.mu.Unlock()
	if ok {
		return w, nil
	}
	gvr, err := c.resolver.Resource(gr)
	if err != nil {
		return watched{}, err
	}
	gvk, err := c.resolver.Kind(gvr)
	if err != nil {
		return watched{}, err
	}
	w = watched{gvr, gvk, c.watch(gvr, metadataOnly)}
	c.mu.Lock()
	c.extra[gr] = w
	c.mu.Unlock()
	return w, nil
}

// allDependencyInformers returns the fixed and the extra dependency informers.
func (c *Controller) allDependencyInformers(f *fixedInformers) []watched {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]watched, 0, len(f.deps)+len(c.extra))
	for _, w := range f.deps {
		out = append(out, w)
	}
	for _, w := range c.extra {
		out = append(out, w)
	}
	return out
}

// key is the queue key of a namespace: "<logical cluster>|<namespace>" (cluster empty
// outside kcp mode).
func key(cluster, namespace string) string { return cluster + "|" + namespace }

// splitKey reverses key.
func splitKey(k string) (cluster, namespace string) {
	cluster, namespace, _ = strings.Cut(k, "|")
	return cluster, namespace
}

// enqueueObject queues the namespace of obj, and forgets the references of a deleted one.
func (c *Controller) enqueueObject(obj interface{}, deleted bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	o, err := meta.Accessor(obj)
	if err != nil || o.GetNamespace() == "" {
		return
	}
	if deleted {
		c.mu.Lock()
		delete(c.memo, o.GetUID())
		c.mu.Unlock()
		c.parsed.Forget(o.GetUID())
		c.pending.Forget(o.GetUID())
	}
	c.queue.Add(key(o.GetAnnotations()[contract.ClusterAnnotation], o.GetNamespace()))
}

// namespaceEvents is the event handler of every informer of namespaced objects: every event
// queues the object's namespace.
func (c *Controller) namespaceEvents() toolscache.ResourceEventHandlerFuncs {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.enqueueObject(obj, false) },
		UpdateFunc: func(_, obj interface{}) { c.enqueueObject(obj, false) },
		DeleteFunc: func(obj interface{}) { c.enqueueObject(obj, true) },
	}
}

// placementRead returns what a round reads of a Placement (placementsOf, decide, writeReports)
// as a comparable string: its generation (the spec: selection, spec.dependencies), whether it
// is being deleted, its annotations (the logical cluster) and the two status fields this
// controller writes (status.missingDependencies, status.unmirroredDependencies). The rest of
// the status is the placement controller's, which writes it as the objects are placed: each
// such write queued a round of the namespace for nothing (100 Placements, bench scenario 10).
// "" when obj is not an object.
func placementRead(obj interface{}) string {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return ""
	}
	missing, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "missingDependencies")
	unmirrored, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "unmirroredDependencies")
	return fmt.Sprint(u.GetGeneration(), u.GetDeletionTimestamp() != nil, u.GetAnnotations(), missing, unmirrored)
}

// enqueueRuleObjects queues the namespace of every object of a DependencyRule's resource.
func (c *Controller) enqueueRuleObjects(obj interface{}) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	r, err := ruleOf(obj)
	if err != nil {
		return
	}
	c.enqueueResourceObjects(schema.GroupVersionResource{Group: r.Spec.Resource.Group, Version: r.Spec.Resource.Version, Resource: r.Spec.Resource.Resource})
}

// enqueueResourceObjects queues the namespace of every object of gvr, a resource a
// DependencyRule or ResourceMapping names.
func (c *Controller) enqueueResourceObjects(gvr schema.GroupVersionResource) {
	if !c.informers.Watches(gvr) {
		// Its informer starts in the next round of a namespace, whose first list queues
		// every namespace of its objects; queue the namespaces with Placements meanwhile.
		c.enqueuePlacementNamespaces()
		return
	}
	for _, o := range c.informers.Informer(gvr).GetStore().List() {
		c.enqueueObject(o, false)
	}
}

// mappingRead returns what a round reads of a ResourceMapping as a comparable string: its
// generation (the spec), logical cluster and locations. "" when obj is not an object.
func mappingRead(obj interface{}) string {
	o, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return fmt.Sprint(o.GetGeneration(), o.GetAnnotations()[contract.ClusterAnnotation], locationsOf(o))
}

// enqueuePlacementNamespaces queues every namespace that has a Placement.
func (c *Controller) enqueuePlacementNamespaces() {
	for _, obj := range c.placements.GetStore().List() {
		c.enqueueObject(obj, false)
	}
}

// listFailed reports whether the informer of gvr (full or metadata) cannot list: its last
// list failed with 403 Forbidden or 404 Not Found and it has not synced.
func (c *Controller) listFailed(gvr schema.GroupVersionResource, full bool, informer toolscache.SharedIndexInformer) bool {
	if informer.HasSynced() {
		return false
	}
	err := c.informers.ListError(gvr, full)
	return apierrors.IsForbidden(err) || apierrors.IsNotFound(err)
}
