package customization

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/openapi"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/clusterinformer"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
)

// Resource is the GroupVersionResource of Customizations.
var Resource = controlv1alpha1.SchemeGroupVersion.WithResource("customizations")

// FollowerOptions configure a Follower.
type FollowerOptions struct {
	// Options are the Compiler's. When TypeConverters is nil and OpenAPI is set, the Follower
	// builds them from OpenAPI.
	Options
	// OpenAPI is the source's OpenAPI v3 client (a discovery client's OpenAPIV3()); the schemas
	// of ApplyConfiguration mutations come from it through k8s.io/apiserver's
	// patch.NewTypeConverterManager, which Run runs (it polls the document list every 5 s, as
	// kube-apiserver's MutatingAdmissionPolicy plugin does with its loopback client).
	OpenAPI openapi.Client
	// Access is the location-access mode: in locationbinding.ModeBound the Follower follows
	// LocationBindings too and its snapshots bind (Snapshot.Bindings, bindings.go); "" is
	// locationbinding.ModeOpen.
	Access locationbinding.Mode
}

// Follower keeps a Snapshot of the source's Customizations and SyncTargets (and, in the Bound
// location-access mode, LocationBindings: bindings.go) current with informers, and delivers
// every new snapshot to its OnChange functions in resourceVersion order.
//
// The informers are clusterinformer.Informers: on a kcp source (read through its wildcard
// endpoint) they key objects by logical cluster, namespace and name, so Customizations with the
// same namespace/name in two logical clusters are two Customizations, each applied to its own
// cluster (docs/design.md, "Names"). A location is one name across the
// source (views and registrations are per location, not per cluster): its SyncTarget is expected
// in one logical cluster; were there SyncTargets of that name in several, the follower uses the
// one whose cluster name sorts first, so that every replica decides alike.
//
// A source without the Customization or SyncTarget CRD, or an identity that may not list them,
// leaves that part empty: the follower counts as synced, logs once per reason, and keeps
// retrying with client-go's backoff (installing the CRD later is picked up). Updates that
// change nothing rendering reads (a Customization's status, a SyncTarget's status) make no
// new snapshot.
type Follower struct {
	compiler       *Compiler
	typeConverters patch.TypeConverterManager
	runConverters  bool

	customizations, targets *clusterinformer.Informer
	// locationBindings follows LocationBindings in the Bound mode; nil in the Open mode.
	locationBindings *clusterinformer.Informer

	mu sync.Mutex
	// items are the live Customizations by key, locs the SyncTargets' locations by name.
	items map[RuleKey]*controlv1alpha1.Customization
	locs  map[string]Location
	// bindings are the compiled LocationBindings by key (the Bound mode); index is their Index
	// over locs, built again (currentBindings) only when indexStale says a binding or a
	// SyncTarget's labels changed, so that a change of a Customization keeps the Index and
	// the views compare no bindings (locationbinding.Index.Changed of an Index with itself).
	bindings   map[locationbinding.Key]*locationbinding.Binding
	index      *locationbinding.Index
	indexStale bool
	// rv is the newest resourceVersion applied to items and locs.
	rv uint64
	// unavailable holds the informers whose resource cannot be listed (not found, forbidden).
	unavailable map[schema.GroupVersionResource]bool
	// logged are the compile errors already logged, by Customization and spec.
	logged map[RuleKey][32]byte

	changed  chan struct{}
	current  atomic.Pointer[Snapshot]
	onChange []func(*Snapshot)
}

// NewFollower returns a Follower over the source's dynamic client. Register OnChange functions,
// then call Run.
func NewFollower(dyn dynamic.Interface, opts FollowerOptions) *Follower {
	f := &Follower{
		items:       map[RuleKey]*controlv1alpha1.Customization{},
		locs:        map[string]Location{},
		bindings:    map[locationbinding.Key]*locationbinding.Binding{},
		unavailable: map[schema.GroupVersionResource]bool{},
		logged:      map[RuleKey][32]byte{},
		changed:     make(chan struct{}, 1),
	}
	if opts.TypeConverters == nil && opts.OpenAPI != nil {
		opts.TypeConverters = patch.NewTypeConverterManager(nil, opts.OpenAPI)
		f.runConverters = true
	}
	f.typeConverters = opts.TypeConverters
	f.compiler = NewCompiler(opts.Options)
	f.current.Store(Empty())
	// The informers' keys name an object's cluster as f.cluster does.
	clusters := clusterinformer.Clusters{Default: opts.PlainCluster, IgnoreAnnotation: opts.PlainCluster != ""}
	f.customizations = clusterinformer.NewForResource(dyn, Resource, toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { f.setCustomization(nil, obj) },
		UpdateFunc: f.setCustomization,
		DeleteFunc: f.deleteCustomization,
	}, clusterinformer.Options{Clusters: clusters, Transform: decodeCustomization,
		WatchErrorHandler: f.watchErrors(Resource, "Customizations", "views apply no Customizations (spec-diff patches only)")})
	f.targets = clusterinformer.NewForResource(dyn, synctarget.Resource, toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { f.setTarget(nil, obj) },
		UpdateFunc: f.setTarget,
		DeleteFunc: f.deleteTarget,
	}, clusterinformer.Options{Clusters: clusters, Transform: decodeSyncTarget,
		WatchErrorHandler: f.watchErrors(synctarget.Resource, "SyncTargets", "Customizations see every location without labels")})
	if opts.Access == locationbinding.ModeBound {
		f.locationBindings = f.newBindingInformer(dyn, clusters)
	}
	return f
}

// OnChange registers fn, called with every new snapshot (from one goroutine, in
// resourceVersion order: never lower than the previous one's; equal when a late event of the
// other informer was older than the newest change already delivered). Call before Run.
func (f *Follower) OnChange(fn func(*Snapshot)) { f.onChange = append(f.onChange, fn) }

// Snapshot returns the newest snapshot: Empty() until the follower has synced (HasSynced).
func (f *Follower) Snapshot() *Snapshot { return f.current.Load() }

// HasSynced reports whether both informers have listed their resource once, or cannot
// (a missing CRD, no permission). Until then a snapshot may lack Customizations, so rendering
// with it could put unmodified objects on targets: callers wait for it.
func (f *Follower) HasSynced() bool {
	// The informers' HasSynced wait for their queue, which is locked while a handler runs and
	// takes mu: ask them without holding mu.
	customizations, targets := f.customizations.HasSynced(), f.targets.HasSynced()
	bindings := f.locationBindings == nil || f.locationBindings.HasSynced()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.locationBindings != nil {
		// The Bound mode binds with SyncTargets and LocationBindings: without either it would
		// bind too little, and the views would lose objects (bindings.go).
		return (customizations || f.unavailable[Resource]) && targets && bindings
	}
	return (customizations || f.unavailable[Resource]) && (targets || f.unavailable[synctarget.Resource])
}

// Waiting returns what keeps HasSynced false, for a person reading a readiness check: one
// entry per resource of the source not listed yet, its GroupResource with "(cannot be listed:
// not served or forbidden)" when its last list failed so; nil once synced. In the Bound
// location-access mode SyncTargets and LocationBindings must be listed (their CRDs installed,
// the server's identity allowed to list them); otherwise an unavailable resource counts as
// listed (HasSynced). A nil Follower waits for nothing.
func (f *Follower) Waiting() []string {
	if f == nil || f.HasSynced() {
		return nil
	}
	type part struct {
		gvr      schema.GroupVersionResource
		informer *clusterinformer.Informer
	}
	parts := []part{{Resource, f.customizations}, {synctarget.Resource, f.targets}}
	if f.locationBindings != nil {
		parts = append(parts, part{locationbinding.Resource, f.locationBindings})
	}
	var out []string
	for _, p := range parts {
		if p.informer.HasSynced() {
			continue
		}
		f.mu.Lock()
		unavailable := f.unavailable[p.gvr]
		f.mu.Unlock()
		what := p.gvr.GroupResource().String()
		if unavailable {
			what += " (cannot be listed: not served or forbidden)"
		}
		out = append(out, what)
	}
	return out
}

// Run runs the informers and delivers snapshots until ctx ends: the first once synced, then
// one after each batch of changes.
func (f *Follower) Run(ctx context.Context) {
	if f.runConverters {
		go f.typeConverters.Run(ctx)
	}
	go f.customizations.Run(ctx)
	go f.targets.Run(ctx)
	if f.locationBindings != nil {
		go f.locationBindings.Run(ctx)
	}
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return f.HasSynced(), nil
	}); err != nil {
		return
	}
	f.deliver(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.changed:
			f.deliver(ctx)
		}
	}
}

// deliver builds the snapshot of the current items and locations and hands it out.
func (f *Follower) deliver(ctx context.Context) {
	f.mu.Lock()
	rv := f.rv
	items := make([]*controlv1alpha1.Customization, 0, len(f.items))
	for _, c := range f.items {
		items = append(items, c)
	}
	locs := make([]Location, 0, len(f.locs))
	for _, l := range f.locs {
		locs = append(locs, l)
	}
	bindings := f.currentBindings(locs)
	f.mu.Unlock()

	s, errs := f.compiler.Snapshot(rv, items, locs)
	s = s.WithBindings(bindings)
	f.logCompileErrors(ctx, errs)
	f.current.Store(s)
	for _, fn := range f.onChange {
		fn(s)
	}
}

// logCompileErrors logs each Customization's compile errors once per spec (again when it was
// fixed in between).
func (f *Follower) logCompileErrors(ctx context.Context, errs []CompileError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	failing := make(map[RuleKey]bool, len(errs))
	for _, e := range errs {
		k := RuleKey{Cluster: e.Cluster, Namespace: e.Namespace, Name: e.Name}
		failing[k] = true
		fp := f.compiler.fingerprintOf(k)
		if logged, ok := f.logged[k]; ok && logged == fp {
			continue
		}
		klog.FromContext(ctx).Info("A Customization does not compile; the objects it selects fail to render (views keep their last rendering)",
			"customization", k.String(), "field", e.Field, "err", contract.Truncate(e.Err.Error(), 1024))
	}
	for _, e := range errs {
		k := RuleKey{Cluster: e.Cluster, Namespace: e.Namespace, Name: e.Name}
		f.logged[k] = f.compiler.fingerprintOf(k)
	}
	for k := range f.logged {
		if !failing[k] {
			delete(f.logged, k)
		}
	}
}

// Customizations returns the Customizations the informer holds (the newest version of each,
// status included). Shared: READ-ONLY.
func (f *Follower) Customizations() []*controlv1alpha1.Customization {
	var out []*controlv1alpha1.Customization
	for _, obj := range f.customizations.GetStore().List() {
		if c, ok := obj.(*controlv1alpha1.Customization); ok {
			out = append(out, c)
		}
	}
	return out
}

// key returns the key of a Customization: its logical cluster, namespace and name.
func (f *Follower) key(c *controlv1alpha1.Customization) RuleKey {
	return RuleKey{Cluster: f.cluster(c), Namespace: c.Namespace, Name: c.Name}
}

// cluster returns the logical cluster of a source object: the configured one of a plain
// source, else its kcp.io/cluster annotation (docs/design.md, "Names").
func (f *Follower) cluster(obj metav1.Object) string {
	if cluster := f.compiler.opts.PlainCluster; cluster != "" {
		return cluster
	}
	return obj.GetAnnotations()[contract.ClusterAnnotation]
}

// setCustomization records an added or updated Customization when its spec or deletion
// changed (old is nil for an add).
func (f *Follower) setCustomization(old, obj interface{}) {
	c, ok := obj.(*controlv1alpha1.Customization)
	if !ok {
		return
	}
	if o, ok := old.(*controlv1alpha1.Customization); ok && apiequality.Semantic.DeepEqual(o.Spec, c.Spec) &&
		(o.DeletionTimestamp == nil) == (c.DeletionTimestamp == nil) {
		return
	}
	f.mu.Lock()
	f.items[f.key(c)] = c
	f.advance(c)
	f.mu.Unlock()
	f.signal()
}

// deleteCustomization forgets a deleted Customization.
func (f *Follower) deleteCustomization(obj interface{}) {
	obj, rv := f.deleted(f.customizations, obj)
	c, ok := obj.(*controlv1alpha1.Customization)
	if !ok {
		return
	}
	f.mu.Lock()
	delete(f.items, f.key(c))
	f.advanceTo(rv)
	f.mu.Unlock()
	f.signal()
}

// setTarget records an added SyncTarget, or an updated one whose labels changed.
func (f *Follower) setTarget(old, obj interface{}) {
	st, ok := obj.(*controlv1alpha1.SyncTarget)
	if !ok {
		return
	}
	if o, ok := old.(*controlv1alpha1.SyncTarget); ok && LocationFromSyncTarget(o).Equal(LocationFromSyncTarget(st)) {
		return
	}
	f.mu.Lock()
	f.setLocation(st.Name)
	f.indexStale = true
	f.advance(st)
	f.mu.Unlock()
	f.signal()
}

// deleteTarget forgets a deleted SyncTarget (its location then has no labels, unless another
// logical cluster has a SyncTarget of that name).
func (f *Follower) deleteTarget(obj interface{}) {
	obj, rv := f.deleted(f.targets, obj)
	st, ok := obj.(*controlv1alpha1.SyncTarget)
	if !ok {
		return
	}
	f.mu.Lock()
	f.setLocation(st.Name)
	f.indexStale = true
	f.advanceTo(rv)
	f.mu.Unlock()
	f.signal()
}

// setLocation sets location name in locs from the SyncTargets of that name the informer holds
// (it has taken the change when its handler runs): the one whose logical cluster sorts first
// (see Follower), none when there is none. Called with mu held.
func (f *Follower) setLocation(name string) {
	var chosen *controlv1alpha1.SyncTarget
	for _, obj := range f.targets.GetStore().List() {
		st, ok := obj.(*controlv1alpha1.SyncTarget)
		if ok && st.Name == name && (chosen == nil || f.cluster(st) < f.cluster(chosen)) {
			chosen = st
		}
	}
	if chosen == nil {
		delete(f.locs, name)
		return
	}
	f.locs[name] = LocationFromSyncTarget(chosen)
}

// deleted unwraps a deletion the informer only learnt by relisting, whose resourceVersion is
// then that of the relist (the deletion happened before it), and returns the object and the
// resourceVersion of the deletion.
func (f *Follower) deleted(inf *clusterinformer.Informer, obj interface{}) (interface{}, uint64) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return d.Obj, parseRV(inf.LastSyncResourceVersion())
	}
	if m, err := meta.Accessor(obj); err == nil {
		return obj, parseRV(m.GetResourceVersion())
	}
	return obj, 0
}

// advance moves rv to obj's resourceVersion if newer. Called with mu held.
func (f *Follower) advance(obj metaObject) { f.advanceTo(parseRV(obj.GetResourceVersion())) }

// advanceTo moves rv to v if newer. Called with mu held.
func (f *Follower) advanceTo(v uint64) {
	if v > f.rv {
		f.rv = v
	}
}

// metaObject is what advance reads.
type metaObject interface{ GetResourceVersion() string }

// signal asks Run for a new snapshot (coalescing).
func (f *Follower) signal() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// parseRV parses a resourceVersion; 0 when it is not a number.
func parseRV(s string) uint64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
}

// watchErrors returns the watch error handler of the informer of gvr (whose objects are what,
// e.g. "Customizations"): a failure to list or watch whose reason (the API Status reason:
// NotFound for a missing CRD, Forbidden ...) differs from the previous one is logged once,
// repeats at level 4; NotFound and Forbidden mark the resource unavailable (the follower counts
// as synced without it); consequence says what that means for views. Ordinary ends of a watch
// go to client-go's default handler.
func (f *Follower) watchErrors(gvr schema.GroupVersionResource, what, consequence string) toolscache.WatchErrorHandlerWithContext {
	resource := gvr.GroupResource().String()
	var last string
	return func(ctx context.Context, r *toolscache.Reflector, err error) {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			toolscache.DefaultWatchErrorHandler(ctx, r, err)
			return
		}
		reason := string(apierrors.ReasonForError(err))
		if reason == "" {
			reason = "Unknown"
		}
		unavailable := apierrors.IsNotFound(err) || apierrors.IsForbidden(err)
		f.mu.Lock()
		changed := reason != last
		last = reason
		wasUnavailable := f.unavailable[gvr]
		f.unavailable[gvr] = unavailable
		f.mu.Unlock()
		if unavailable && !wasUnavailable {
			f.signal()
		}
		if changed {
			klog.FromContext(ctx).Error(nil, "Cannot list or watch "+what+" of the source; until it works, "+consequence,
				"resource", resource, "reason", reason, "err", contract.Truncate(err.Error(), 512))
			return
		}
		klog.FromContext(ctx).V(4).Info("Still cannot list or watch "+what+" of the source", "resource", resource, "reason", reason, "err", err)
	}
}

// decodeCustomization is the Customization informer's transform: the Go type, decoded once
// per change, without managedFields. One that does not decode is logged and dropped (the
// CRD's schema makes that unlikely); it then customizes nothing.
func decodeCustomization(obj interface{}) (interface{}, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	c := &controlv1alpha1.Customization{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, c); err != nil {
		klog.ErrorS(err, "Ignoring a Customization that does not decode", "customization", u.GetNamespace()+"/"+u.GetName())
		return obj, nil
	}
	c.ManagedFields = nil
	return c, nil
}

// decodeSyncTarget is the SyncTarget informer's transform (synctarget.FromUnstructured),
// without managedFields; one that does not decode is logged and dropped.
func decodeSyncTarget(obj interface{}) (interface{}, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	st, err := synctarget.FromUnstructured(u)
	if err != nil {
		klog.ErrorS(err, "Ignoring a SyncTarget that does not decode", "syncTarget", u.GetName())
		return obj, nil
	}
	st.ManagedFields = nil
	return st, nil
}
