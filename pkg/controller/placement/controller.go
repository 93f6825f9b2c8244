package placement

import (
	"context"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/binding"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/informers"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/pending"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/served"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/worker"
	"github.com/cluster-mapper/cluster-mapper/pkg/placement"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
)

// Resource is the GroupVersionResource of Placements.
var Resource = controlv1alpha1.SchemeGroupVersion.WithResource("placements")

// Finalizer is kept on a Placement until the assignments it wrote are removed.
const Finalizer = "control.mapper.kcp.io/placement"

// DefaultConcurrentWrites is the default of Config.ConcurrentWrites: enough applies in flight
// to keep the source busy while each waits for its round trip (bench scenario 10), few enough
// to stay a small share of a priority level's seats under API Priority and Fairness.
const DefaultConcurrentWrites = 32

// Config configures a Controller.
type Config struct {
	// Dynamic is the source's client (Placements' finalizers and statuses).
	Dynamic dynamic.Interface
	// Metadata is the source's metadata client: the server-side applies of the placed
	// objects' annotations.
	Metadata metadata.Interface
	// Informers are the process's shared informers over the source; they need a metadata
	// client (informers.NewSet).
	Informers *informers.Set
	// Resolver says whether the source serves a placed resource and gives its kind, for the
	// applies: the metadata informers that serve Placements which do not divide replicas
	// carry no kind.
	Resolver *served.Resolver
	// Workers is the number of namespaces reconciled at once; default 2.
	Workers int
	// ConcurrentWrites is the number of server-side applies of objects in flight at once,
	// over all workers; default DefaultConcurrentWrites.
	ConcurrentWrites int
	// Recorder records Events on Placements (objects moved off a location); optional.
	Recorder events.EventRecorder
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Bindings are the LocationBindings (the Bound mode): Placements choose only the
	// locations bound to their namespace (bound.go). nil: the Open mode, every location.
	Bindings *binding.Tracker
}

// Controller places the objects that Placements select.
type Controller struct {
	dyn       dynamic.Interface
	metadata  metadata.Interface
	informers *informers.Set
	resolver  *served.Resolver
	workers   int
	recorder  events.EventRecorder
	now       func() time.Time
	bindings  *binding.Tracker
	queue     workqueue.TypedRateLimitingInterface[string]
	// limit bounds the object writes in flight (Config.ConcurrentWrites).
	limit *worker.Limit
	// pending are the writes the informers have not delivered yet.
	pending *pending.Writes
	// applyWrite writes one write to the source (applyAll); tests replace it, as
	// kube-controller-manager's controllers let tests replace their syncHandler.
	applyWrite func(ctx context.Context, w *write) error

	placements, targets toolscache.SharedIndexInformer

	// locations are the SyncTargets as placement reads them.
	locations *Locations

	mu sync.Mutex
	// watched are the informers that have this controller's event handler.
	watched sets.Set[watchedInformer]
}

// watchedInformer names an informer of one resource: the whole objects (full) or their
// metadata.
type watchedInformer struct {
	gvr  schema.GroupVersionResource
	full bool
}

// New returns a Controller; Run starts it.
func New(cfg Config) *Controller {
	registerMetrics()
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ConcurrentWrites <= 0 {
		cfg.ConcurrentWrites = DefaultConcurrentWrites
	}
	c := &Controller{
		dyn: cfg.Dynamic, metadata: cfg.Metadata, informers: cfg.Informers, resolver: cfg.Resolver, workers: cfg.Workers, recorder: cfg.Recorder, now: cfg.Now, bindings: cfg.Bindings,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "placement"}),
		placements: cfg.Informers.Informer(Resource),
		targets:    cfg.Informers.Informer(synctarget.Resource),
		watched:    sets.New[watchedInformer](),
		limit:      worker.NewLimit(cfg.ConcurrentWrites),
		pending:    pending.New(),
	}
	c.applyWrite = c.apply
	_, _ = c.placements.AddEventHandler(c.namespaceEvents())
	if cfg.Bindings != nil {
		// A namespace's bound locations are its Placements' choices.
		cfg.Bindings.AddBindingHandler(c.namespaceEvents())
	}
	// A location's labels, readiness, schedulability or capacity can change any Placement's
	// choices; its other status (object counts, every minute per location) cannot.
	c.locations = NewLocations(c.targets, func(_, _ *placement.Location) { c.enqueueAll() })
	return c
}

// Run runs the informers and the workers until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.informers.Start(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), c.placements.HasSynced, c.targets.HasSynced, c.bindings.HasSynced) {
		return
	}
	worker.Run(ctx, c.queue, c.workers, "the Placements of a namespace", c.reconcile)
}

// key is the queue key of a namespace: "<logical cluster>|<namespace>" (cluster empty
// outside kcp mode).
func key(cluster, namespace string) string { return cluster + "|" + namespace }

// splitKey reverses key.
func splitKey(k string) (cluster, namespace string) {
	cluster, namespace, _ = strings.Cut(k, "|")
	return cluster, namespace
}

// enqueueObject queues the namespace of a Placement or a placed object.
func (c *Controller) enqueueObject(obj interface{}) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	c.queue.Add(key(o.GetAnnotations()[contract.ClusterAnnotation], o.GetNamespace()))
}

// namespaceEvents is the event handler of Placements and placed objects: every event queues
// the object's namespace; a deleted object's pending write is forgotten.
func (c *Controller) namespaceEvents() toolscache.ResourceEventHandlerFuncs {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueObject,
		UpdateFunc: func(_, obj interface{}) { c.enqueueObject(obj) },
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if o, err := meta.Accessor(obj); err == nil {
				c.pending.Forget(o.GetUID())
			}
			c.enqueueObject(obj)
		},
	}
}

// enqueueAll queues every namespace that has a Placement.
func (c *Controller) enqueueAll() {
	for _, obj := range c.placements.GetStore().List() {
		c.enqueueObject(obj)
	}
}

// watch returns the informer of gvr, with this controller's event handler added once: the
// whole objects when full or when another controller of the process watches them whole
// already (one watch of the source instead of two), else the trimmed objects another
// controller watches (informers.Set.ObjectInformer), their metadata otherwise.
func (c *Controller) watch(gvr schema.GroupVersionResource, full bool) toolscache.SharedIndexInformer {
	full = full || c.informers.Watches(gvr)
	var informer toolscache.SharedIndexInformer
	switch shared, ok := c.informers.ObjectInformer(gvr); {
	case full:
		informer = c.informers.Informer(gvr)
	case ok:
		// The dependency controller's trimmed objects carry the metadata whole.
		informer = shared
	default:
		informer = c.informers.MetadataInformer(gvr)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := (watchedInformer{gvr, full}); !c.watched.Has(w) {
		c.watched.Insert(w)
		_, _ = informer.AddEventHandler(c.namespaceEvents())
	}
	return informer
}

// watchesFull reports whether this controller watches the whole objects of gvr.
func (c *Controller) watchesFull(gvr schema.GroupVersionResource) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watched.Has(watchedInformer{gvr, true})
}
