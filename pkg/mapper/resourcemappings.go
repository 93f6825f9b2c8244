package mapper

import (
	"context"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/clusterinformer"
)

// mappingSyncTimeout bounds how long one discovery refresh waits for the first list of the
// ResourceMappings; resources are not started before it (they could start under the wrong
// projection), and the next refresh waits again.
const mappingSyncTimeout = 30 * time.Second

// resourceMappings follows the ResourceMappings of the mapper's view (docs/resourcemapping.md):
// an informer on the view, the Projections decided from its store, and a signal to the
// refresh loop whenever they may have changed.
type resourceMappings struct {
	changed chan struct{} // buffered 1: a refresh is due

	mu          sync.RWMutex
	informer    *clusterinformer.Informer // nil until the view serves ResourceMappings
	projections map[schema.GroupResource]Projection
	verdicts    map[string]MappingVerdict
	// collisions are, per mapping (contract.Key), the FitResources collision it takes part in
	// (applyMappings): its Accepted condition says so instead of its verdict.
	collisions map[string]string
	// namings compiles each spec.naming once (and keeps its *Naming, so that an unchanged
	// projection compares equal).
	namings namingCache
}

func newResourceMappings() *resourceMappings {
	return &resourceMappings{changed: make(chan struct{}, 1)}
}

// start starts the informer on the view's ResourceMappings once, and waits (up to
// mappingSyncTimeout) for its first list. It reports whether the mappings are known.
func (rm *resourceMappings) start(ctx context.Context, m *Mapper) bool {
	rm.mu.Lock()
	inf := rm.informer
	if inf == nil {
		inf = newViewInformer(m.view, MappingResource, m.cfg.ClusterName, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(interface{}) { rm.decide() },
			UpdateFunc: func(_, _ interface{}) { rm.decide() },
			DeleteFunc: func(interface{}) { rm.decide() },
		})
		rm.informer = inf
		go inf.Run(ctx)
	}
	rm.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, mappingSyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(wctx.Done(), inf.HasSynced) {
		return false
	}
	rm.decide() // an empty list delivers no event
	return true
}

// decide recomputes the projections from the informer's store and signals the refresh loop.
func (rm *resourceMappings) decide() {
	rm.mu.Lock()
	objs := map[string]*unstructured.Unstructured{}
	if rm.informer != nil {
		for _, k := range rm.informer.GetStore().ListKeys() {
			if o, ok, _ := rm.informer.GetStore().GetByKey(k); ok {
				if u, ok := o.(*unstructured.Unstructured); ok {
					objs[k] = u
				}
			}
		}
	}
	rm.projections, rm.verdicts = projectionsWith(objs, rm.namings.compile)
	used := map[controlv1alpha1.ResourceMappingNaming]bool{}
	for _, p := range rm.projections {
		if p.Naming != nil {
			used[p.Naming.Spec()] = true
		}
	}
	rm.namings.keep(used)
	rm.mu.Unlock()
	select {
	case rm.changed <- struct{}{}:
	default:
	}
}

// projection returns the Projection of view resource gr (the zero Projection when no mapping
// names it).
func (rm *resourceMappings) projection(gr schema.GroupResource) Projection {
	rm.mu.RLock()
	defer rm.mu.RUnlock()
	return rm.projections[gr]
}

// runRefresh runs refreshResources every cfg.DiscoveryInterval, and at once when the
// ResourceMappings change, until ctx ends.
func (m *Mapper) runRefresh(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.mappings.changed:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
		m.refreshResources(ctx)
		m.reportMappings(ctx)
		t.Reset(m.cfg.DiscoveryInterval)
	}
}

// applyMappings reads the ResourceMappings of the view (when it serves them: wanted holds
// MappingResource) and fits wanted, the view resources to map, to them: MappingResource is
// removed (mappings are read, never copied), and the resources a mapping names are read at
// its spec.source.version. Resources already mapped under another projection are stopped, so
// that the caller starts them again under the new one (their copies stay on the target, as
// when the view stops serving a resource). It returns false when the mappings are not known
// yet: then no resource may start.
func (m *Mapper) applyMappings(ctx context.Context, wanted map[schema.GroupVersionResource]bool) bool {
	if _, ok := wanted[MappingResource]; ok && !m.mappings.start(ctx, m) {
		klog.FromContext(ctx).Info("The view's ResourceMappings have not been listed yet; starting no resource until they are")
		return false
	}
	m.mappings.mu.Lock()
	collisions := FitResources(wanted, m.mappings.projections)
	m.mappings.collisions = map[string]string{}
	for _, c := range collisions {
		for _, k := range c.Mappings {
			m.mappings.collisions[k] = c.Message
		}
	}
	m.mappings.mu.Unlock()
	for _, c := range collisions {
		klog.FromContext(ctx).Info("Not mapping resources whose copies would share one target resource: " + c.Message)
	}
	for _, r := range m.resourceList() {
		if p := m.mappings.projection(r.gvr.GroupResource()); p != r.projection {
			klog.FromContext(ctx).Info("The ResourceMapping of a resource changed; restarting it, its copies under the former mapping stay on the target",
				"resource", r.name(), "mapping", p.Mapping, "target", p.TargetResource(r.gvr).String())
			r.stop(m.metrics)
			m.places.dropClaims(r.gvr)
			m.mu.Lock()
			delete(m.resources, r.gvr)
			m.mu.Unlock()
		}
	}
	return true
}

// mappingVerdicts returns the informer on the view's ResourceMappings (nil before it starts)
// and the verdict on each mapping (by contract.Key), a FitResources collision replacing the
// verdict of an accepted mapping that takes part in one (reason SharedTargetResource).
func (m *Mapper) mappingVerdicts() (*clusterinformer.Informer, map[string]MappingVerdict) {
	m.mappings.mu.RLock()
	defer m.mappings.mu.RUnlock()
	out := make(map[string]MappingVerdict, len(m.mappings.verdicts))
	for k, v := range m.mappings.verdicts {
		if msg, ok := m.mappings.collisions[k]; ok && v.Accepted {
			v = MappingVerdict{Reason: controlv1alpha1.ReasonSharedTarget, Message: "Not mapped: " + msg}
		}
		out[k] = v
	}
	return m.mappings.informer, out
}

// MappingProblems returns, sorted, one line per ResourceMapping of the view that is not in
// force ("<cluster>/<name>: <reason>: <message>"): a Conflict, an Invalid mapping, a naming
// that does not compile (InvalidNaming), a collision of target resources
// (SharedTargetResource). The SyncTarget's ResourcesCompatible condition reports them
// (heartbeat). It is safe for concurrent use.
func (m *Mapper) MappingProblems() []string {
	_, verdicts := m.mappingVerdicts()
	var out []string
	for k, v := range verdicts {
		if !v.Accepted {
			out = append(out, mappingNames([]string{k})+": "+v.Reason+": "+v.Message)
		}
	}
	sort.Strings(out)
	return out
}

// reportMappings writes each ResourceMapping's Accepted condition through the view's /status
// (the status write-back of any object: only for a mapping that opts in with
// kcp.io/status-policy, docs/status.md) when it differs from what the view shows. A failed
// write is logged and tried again at the next refresh.
func (m *Mapper) reportMappings(ctx context.Context) {
	inf, verdicts := m.mappingVerdicts()
	if inf == nil {
		return
	}
	for key, v := range verdicts {
		o, ok, _ := inf.GetStore().GetByKey(key)
		u, _ := o.(*unstructured.Unstructured)
		if !ok || u == nil || !Reflects(u) {
			continue
		}
		var rm controlv1alpha1.ResourceMapping
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rm); err != nil {
			continue
		}
		status := metav1.ConditionFalse
		if v.Accepted {
			status = metav1.ConditionTrue
		}
		cond := metav1.Condition{Type: controlv1alpha1.ResourceMappingAccepted, Status: status, Reason: v.Reason, Message: v.Message, ObservedGeneration: rm.Generation}
		if old := meta.FindStatusCondition(rm.Status.Conditions, cond.Type); old != nil && old.Status == cond.Status &&
			old.Reason == cond.Reason && old.Message == cond.Message && old.ObservedGeneration == cond.ObservedGeneration {
			continue
		}
		meta.SetStatusCondition(&rm.Status.Conditions, cond)
		rm.Status.ObservedGeneration = rm.Generation
		statusObj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&rm.Status)
		if err != nil {
			continue
		}
		write := u.DeepCopy()
		write.Object["status"] = statusObj
		src := SourceOf(u, m.cfg.ClusterName)
		view, err := m.clusterViews.For(src.Cluster)
		if err == nil {
			_, err = view.Resource(MappingResource).UpdateStatus(ctx, write, metav1.UpdateOptions{FieldManager: m.cfg.FieldManager})
		}
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Writing the status of a ResourceMapping through the view failed; retrying at the next refresh", "mapping", src.String(), "err", err.Error())
		}
	}
}
