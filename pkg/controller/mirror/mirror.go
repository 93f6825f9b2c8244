// Package mirror keeps mapper-controller's picture of the source objects that location views
// serve: one metadata informer (k8s.io/client-go/metadata, objects as
// metav1.PartialObjectMetadata: the source sends no spec, data or status) per resource that
// mapper-apiserver mirrors, as its views' discovery lists them (every view serves the same
// discovery, docs/views.md "Discovery"), re-read every Config.Interval so that resources
// mapper-apiserver starts or stops mirroring are followed.
//
// Of each object the informer keeps only what mapper-controller's controllers read (trim):
// name, namespace, uid, resourceVersion, generation, labels and the annotations of the contract
// (docs/design.md, "Names": kcp.io/assigned-locations, kcp.io/status-policy,
// kcp.io/status-location, status.kcp.io/<location>, kcp.io/cluster). Its readers are the status
// record controller (pkg/controller/statusrecords), which the informers' events drive, and the
// Customization status controller, which counts the objects each Customization selects.
//
// Like kube-controller-manager's garbage collector, which also watches every resource, it
// reads metadata only: on the wire and in memory an object costs its metadata, whatever its
// size, and mapper-controller never reads a Secret's data.
package mirror

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/clusterinformer"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
)

// NamespaceIndex is the store index of an object's logical cluster and namespace
// (ScopeOf); cluster-scoped objects are in the scope of their cluster and "".
const NamespaceIndex = "clusterNamespace"

// ScopeOf returns the value of NamespaceIndex for the objects of namespace namespace in the
// logical cluster cluster.
func ScopeOf(cluster, namespace string) string { return cluster + "|" + namespace }

// Config configures a Mirror.
type Config struct {
	// Metadata lists and watches the source (on a kcp source, its wildcard endpoint).
	Metadata metadata.Interface
	// Discovery reads a location view's discovery: the resources mapper-apiserver mirrors.
	Discovery discovery.DiscoveryInterface
	// Clusters says how an object's logical cluster is found (its key's cluster).
	Clusters clusterinformer.Clusters
	// Interval is how often the views' discovery is re-read.
	Interval time.Duration
	// OnChange, when set, is called with the resource and key of every object the informers
	// add, update or delete (obj is nil for a deletion), from the informer's goroutine: it
	// must not block (enqueue and return).
	OnChange func(gvr schema.GroupVersionResource, key contract.Key, obj *metav1.PartialObjectMetadata)
}

// Mirror is the set of metadata informers. Safe for concurrent use.
type Mirror struct {
	cfg Config

	mu        sync.Mutex
	informers map[schema.GroupVersionResource]*resourceInformer
	// discovered says the views' discovery was read once.
	discovered bool
	// failing are the resources whose list or watch fails, with the error (logged once).
	failing map[schema.GroupVersionResource]string
	// lastDiscoveryError is the last error reading the views' discovery (logged once).
	lastDiscoveryError string
}

// resourceInformer is one running informer.
type resourceInformer struct {
	inf    *clusterinformer.Informer
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Mirror; Run starts it.
func New(cfg Config) *Mirror {
	if cfg.Interval <= 0 {
		cfg.Interval = 30 * time.Second
	}
	return &Mirror{cfg: cfg, informers: map[schema.GroupVersionResource]*resourceInformer{}, failing: map[schema.GroupVersionResource]string{}}
}

// Run reads the views' discovery every Interval and keeps one informer per resource it lists,
// until ctx ends; then it stops every informer and returns.
func (m *Mirror) Run(ctx context.Context) {
	defer m.stopAll()
	wait.UntilWithContext(ctx, m.syncResources, m.cfg.Interval)
}

// syncResources starts the informers of resources the views serve and stops those of
// resources they no longer serve. A discovery that fails, or fails for some groups, stops
// nothing.
func (m *Mirror) syncResources(ctx context.Context) {
	resources, complete, err := mapper.ViewResources(m.cfg.Discovery, nil)
	if err != nil && len(resources) == 0 {
		m.discoveryFailed(ctx, err)
		return
	}
	var stopped []*resourceInformer
	m.mu.Lock()
	for gvr := range resources {
		if _, ok := m.informers[gvr]; !ok {
			m.startLocked(ctx, gvr)
		}
	}
	if complete {
		for gvr, ri := range m.informers {
			if _, ok := resources[gvr]; !ok {
				stopped = append(stopped, ri)
				delete(m.informers, gvr)
				delete(m.failing, gvr)
			}
		}
	}
	m.discovered = true
	m.mu.Unlock()
	stop(stopped) // outside mu: a stopping informer may still report a list (listed, failed)
}

// discoveryFailed logs that the views' discovery cannot be read: at the default verbosity when
// the error differs from the previous one, else at verbosity 4 (mapper-controller may run
// where no mapper-apiserver serves views; then only the first failure is in the log).
func (m *Mirror) discoveryFailed(ctx context.Context, err error) {
	msg := contract.Truncate(err.Error(), 512)
	m.mu.Lock()
	repeated := msg == m.lastDiscoveryError
	m.lastDiscoveryError = msg
	m.mu.Unlock()
	logger := klog.FromContext(ctx)
	if repeated {
		logger = logger.V(4)
	}
	logger.Info("Cannot read the mirrored resources from a location view's discovery; retrying", "err", msg)
}

// stop stops the informers and waits for them.
func stop(informers []*resourceInformer) {
	for _, ri := range informers {
		ri.cancel()
	}
	for _, ri := range informers {
		<-ri.done
	}
}

// startLocked starts the informer of gvr. Called with mu held.
func (m *Mirror) startLocked(ctx context.Context, gvr schema.GroupVersionResource) {
	ri := m.cfg.Metadata.Resource(gvr)
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { m.changed(gvr, obj, false) },
		UpdateFunc: func(_, obj interface{}) { m.changed(gvr, obj, false) },
		DeleteFunc: func(obj interface{}) { m.changed(gvr, obj, true) },
	}
	inf := clusterinformer.New(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := ri.List(ctx, o)
			if err == nil {
				m.listed(gvr)
			}
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return ri.Watch(ctx, o) },
	}, handler, clusterinformer.Options{
		Description:       "metadata " + gvr.String(),
		Clusters:          m.cfg.Clusters,
		Transform:         trim,
		ObjectType:        &metav1.PartialObjectMetadata{},
		Indexers:          indexers(m.cfg.Clusters),
		WatchErrorHandler: func(ctx context.Context, _ *cache.Reflector, err error) { m.failed(ctx, gvr, err) },
	})
	ctx, cancel := context.WithCancel(ctx)
	r := &resourceInformer{inf: inf, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); inf.Run(ctx) }()
	m.informers[gvr] = r
}

// indexers are the informers' indexes: NamespaceIndex, with the clusters c finds.
func indexers(c clusterinformer.Clusters) cache.Indexers {
	keyFunc := clusterinformer.KeyFunc(c)
	return cache.Indexers{NamespaceIndex: func(obj interface{}) ([]string, error) {
		k, err := keyFunc(obj)
		if err != nil {
			return nil, err
		}
		cluster, namespace, _, _ := contract.Key(k).Split()
		return []string{ScopeOf(cluster, namespace)}, nil
	}}
}

// changed hands one informer event to OnChange.
func (m *Mirror) changed(gvr schema.GroupVersionResource, obj interface{}, deleted bool) {
	if m.cfg.OnChange == nil {
		return
	}
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		m.cfg.OnChange(gvr, contract.Key(d.Key), nil)
		return
	}
	o, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	k, err := clusterinformer.KeyFunc(m.cfg.Clusters)(o)
	if err != nil {
		return
	}
	if deleted {
		o = nil
	}
	m.cfg.OnChange(gvr, contract.Key(k), o)
}

// failed logs a failing list or watch of gvr, once per distinct error, and counts the
// resource as failing until its next successful list.
func (m *Mirror) failed(ctx context.Context, gvr schema.GroupVersionResource, err error) {
	msg := contract.Truncate(err.Error(), 512)
	m.mu.Lock()
	prev, known := m.failing[gvr]
	m.failing[gvr] = msg
	m.mu.Unlock()
	if !known || prev != msg {
		klog.FromContext(ctx).Info("Cannot list or watch the metadata of a mirrored resource; retrying with backoff", "resource", gvr.String(), "err", msg)
	}
}

// listed records a successful list of gvr.
func (m *Mirror) listed(gvr schema.GroupVersionResource) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.failing, gvr)
}

// stopAll stops every informer and waits for them.
func (m *Mirror) stopAll() {
	m.mu.Lock()
	all := make([]*resourceInformer, 0, len(m.informers))
	for gvr, ri := range m.informers {
		all = append(all, ri)
		delete(m.informers, gvr)
	}
	m.mu.Unlock()
	stop(all)
}

// HasSynced reports whether the views' discovery was read and every informer has listed its
// resource once, or cannot (its list fails: it is logged and retried, and blocks nothing).
func (m *Mirror) HasSynced() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.discovered {
		return false
	}
	for gvr, ri := range m.informers {
		if _, failing := m.failing[gvr]; !failing && !ri.inf.HasSynced() {
			return false
		}
	}
	return true
}

// Resources returns the resources with a running informer, sorted.
func (m *Mirror) Resources() []schema.GroupVersionResource {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]schema.GroupVersionResource, 0, len(m.informers))
	for gvr := range m.informers {
		out = append(out, gvr)
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionResource) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// Get returns the object of gvr with key, as the informer holds it (trimmed; READ-ONLY).
func (m *Mirror) Get(gvr schema.GroupVersionResource, key contract.Key) (*metav1.PartialObjectMetadata, bool) {
	inf := m.informer(gvr)
	if inf == nil {
		return nil, false
	}
	obj, ok, err := inf.GetStore().GetByKey(string(key))
	if err != nil || !ok {
		return nil, false
	}
	o, ok := obj.(*metav1.PartialObjectMetadata)
	return o, ok
}

// InNamespace returns the objects of gvr in namespace of the logical cluster cluster (trimmed;
// READ-ONLY), in no particular order.
func (m *Mirror) InNamespace(gvr schema.GroupVersionResource, cluster, namespace string) []*metav1.PartialObjectMetadata {
	inf := m.informer(gvr)
	if inf == nil {
		return nil
	}
	objs, err := inf.GetIndexer().ByIndex(NamespaceIndex, ScopeOf(cluster, namespace))
	if err != nil {
		return nil
	}
	out := make([]*metav1.PartialObjectMetadata, 0, len(objs))
	for _, obj := range objs {
		if o, ok := obj.(*metav1.PartialObjectMetadata); ok {
			out = append(out, o)
		}
	}
	return out
}

// informer returns the informer of gvr, or nil.
func (m *Mirror) informer(gvr schema.GroupVersionResource) *clusterinformer.Informer {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ri := m.informers[gvr]; ri != nil {
		return ri.inf
	}
	return nil
}

// Candidates returns the objects of namespace in the logical cluster cluster of every
// resource, as customization.Snapshot.SelectedObjects reads them (resource, labels, assigned
// locations; an object whose assignment does not parse has none). READ-ONLY: the labels are
// the informers'.
func (m *Mirror) Candidates(cluster, namespace string) []customization.Candidate {
	var out []customization.Candidate
	for _, gvr := range m.Resources() {
		for _, o := range m.InNamespace(gvr, cluster, namespace) {
			locations, _ := contract.ParseLocations(o.Annotations[contract.AssignedLocationsAnnotation])
			out = append(out, customization.Candidate{GVR: gvr, Labels: o.Labels, Locations: locations})
		}
	}
	return out
}
