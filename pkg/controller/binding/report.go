package binding

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/informers"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
)

// Event reason and action of an ignored assignment.
const (
	// ReasonUnboundLocation: the object's kcp.io/assigned-locations names locations not bound
	// to its namespace; their views do not show it.
	ReasonUnboundLocation = "UnboundLocation"
	// actionIgnore is the Event's action: the assignment is ignored.
	actionIgnore = "Ignore"
)

// Reporter records a Warning Event UnboundLocation on every object of its resources whose
// kcp.io/assigned-locations names a location not bound to the object's namespace, once per
// object and set of unbound locations (again after that set changes, and after a restart of
// mapper-controller). It reads the objects' metadata from the process's shared metadata
// informers (the placement controller's, when it places the same resources), and checks every
// object again when the bindings change. It writes nothing but Events: mapper-apiserver's
// views ignore such assignments on their own.
type Reporter struct {
	tracker  *Tracker
	recorder events.EventRecorder
	set      *informers.Set
	mapper   meta.RESTMapper
	gvrs     []schema.GroupResource

	rescan chan struct{}

	mu sync.Mutex
	// reported are the unbound locations last reported per object (joined by ",").
	reported map[types.UID]string
	// kinds are the kinds of the resources watched, by resource.
	kinds map[schema.GroupVersionResource]schema.GroupVersionKind
}

// NewReporter returns a Reporter over the objects of resources (resource.group), which it
// resolves with mapper once it runs; it records with recorder.
func NewReporter(tracker *Tracker, set *informers.Set, mapper meta.RESTMapper, recorder events.EventRecorder, resources []schema.GroupResource) *Reporter {
	registerMetrics()
	r := &Reporter{tracker: tracker, recorder: recorder, set: set, mapper: mapper, gvrs: resources,
		rescan: make(chan struct{}, 1), reported: map[types.UID]string{}, kinds: map[schema.GroupVersionResource]schema.GroupVersionKind{}}
	tracker.OnChange(func() {
		select {
		case r.rescan <- struct{}{}:
		default:
		}
	})
	return r
}

// Run watches the resources (retrying those whose kind cannot be resolved yet, every 10 s)
// and checks every object again after each change of the bindings, until ctx ends.
func (r *Reporter) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	pending := slices.Clone(r.gvrs)
	type watched struct {
		gvr schema.GroupVersionResource
		inf toolscache.SharedIndexInformer
	}
	var infs []watched
	resolve := func() {
		var left []schema.GroupResource
		for _, gr := range pending {
			gvr, err := r.mapper.ResourceFor(gr.WithVersion(""))
			var gvk schema.GroupVersionKind
			if err == nil {
				gvk, err = r.mapper.KindFor(gvr)
			}
			if err != nil {
				logger.Info("Cannot resolve a resource whose assignments are checked against the LocationBindings; retrying", "resource", gr.String(), "err", err)
				left = append(left, gr)
				continue
			}
			r.mu.Lock()
			r.kinds[gvr] = gvk
			r.mu.Unlock()
			inf := r.set.MetadataInformer(gvr)
			_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
				AddFunc:    func(obj interface{}) { r.check(gvr, obj) },
				UpdateFunc: func(_, obj interface{}) { r.check(gvr, obj) },
				DeleteFunc: r.forget,
			})
			infs = append(infs, watched{gvr, inf})
		}
		pending = left
		r.set.Start(ctx)
	}
	resolve()
	if !toolscache.WaitForCacheSync(ctx.Done(), r.tracker.HasSynced) {
		return
	}
	retry := time.NewTicker(10 * time.Second)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-retry.C:
			if len(pending) > 0 {
				resolve()
			}
		case <-r.rescan:
			for _, w := range infs {
				for _, obj := range w.inf.GetStore().List() {
					r.check(w.gvr, obj)
				}
			}
		}
	}
}

// check records an Event on obj, an object of gvr, when its assignment names locations not
// bound to its namespace that were not reported for it already. It runs before the tracker
// has synced too; an unsynced tracker binds too little, so check waits for it (HasSynced).
func (r *Reporter) check(gvr schema.GroupVersionResource, obj interface{}) {
	o, err := meta.Accessor(obj)
	if err != nil || !r.tracker.HasSynced() {
		return
	}
	value, ok := o.GetAnnotations()[contract.AssignedLocationsAnnotation]
	if !ok {
		r.forget(obj)
		return
	}
	locs, err := contract.ParseLocations(value)
	if err != nil {
		// Malformed: assigned nowhere (mapper-apiserver counts it); not a binding matter.
		r.forget(obj)
		return
	}
	cluster := o.GetAnnotations()[contract.ClusterAnnotation]
	scope := r.tracker.Index().Scope(cluster, o.GetNamespace())
	var unbound []string
	for _, l := range locs {
		if !scope.Binds(l) {
			unbound = append(unbound, l)
		}
	}
	if len(unbound) == 0 {
		r.forget(obj)
		return
	}
	joined := strings.Join(unbound, ",")
	r.mu.Lock()
	if r.reported[o.GetUID()] == joined {
		r.mu.Unlock()
		return
	}
	r.reported[o.GetUID()] = joined
	gvk := r.kinds[gvr]
	r.mu.Unlock()
	unboundReports.Inc()
	ns := o.GetNamespace()
	where := "namespace " + ns
	if ns == "" {
		where = "the cluster-scoped objects (LocationBindings of " + locationbinding.ClusterScopedNamespace + ")"
	}
	ref := &corev1.ObjectReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Namespace: ns, Name: o.GetName(), UID: o.GetUID(), ResourceVersion: o.GetResourceVersion()}
	r.recorder.Eventf(ref, nil, corev1.EventTypeWarning, ReasonUnboundLocation, actionIgnore,
		"%s names %s, which no LocationBinding binds to %s: ignored, the object is not in %s (docs/tenancy.md)",
		contract.AssignedLocationsAnnotation, contract.Truncate(joined, 512), where, theirViews(len(unbound)))
}

// forget drops what was reported for a deleted object (or one whose assignment is bound now).
func (r *Reporter) forget(obj interface{}) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	r.mu.Lock()
	delete(r.reported, o.GetUID())
	r.mu.Unlock()
}

// theirViews is "its view" or "their views".
func theirViews(n int) string {
	if n == 1 {
		return "its view"
	}
	return "their views"
}
