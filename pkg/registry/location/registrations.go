package location

import (
	"context"
	"errors"
	"io"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	coordinationinformers "k8s.io/client-go/informers/coordination/v1"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
)

// Registry gives the registered locations of the source. *Registrations implements it.
type Registry interface {
	// SyncTargets returns the SyncTargets of the source, in no particular order.
	SyncTargets() []*controlv1alpha1.SyncTarget
	// RenewTime returns the renewTime of the location's Lease, nil when it has no Lease.
	RenewTime(location string) *metav1.MicroTime
}

// Registrations follows the SyncTargets (control.mapper.kcp.io/v1alpha1) and the locations'
// Leases in the source's cluster-mapper-system namespace with informers, for the columns of
// `kubectl get locations` (docs/design.md, "The control plane objects"). It never blocks anything: a
// source without the SyncTarget CRD, or an identity that may not list SyncTargets or Leases,
// leaves the registrations empty, and the failure is logged once per reason (the informers keep
// retrying with client-go's backoff, so installing the CRD later is picked up).
type Registrations struct {
	targets        toolscache.SharedIndexInformer
	leases         toolscache.SharedIndexInformer
	leaseNamespace string
}

var _ Registry = &Registrations{}

// NewRegistrations returns Registrations over the source's clients; leaseNamespace is where
// the Leases are (contract.ControlNamespace when empty). Call Run to start the informers.
func NewRegistrations(kube kubernetes.Interface, dyn dynamic.Interface, leaseNamespace string) *Registrations {
	if leaseNamespace == "" {
		leaseNamespace = contract.ControlNamespace
	}
	r := &Registrations{
		targets:        dynamicinformer.NewFilteredDynamicInformer(dyn, synctarget.Resource, "", 0, toolscache.Indexers{}, nil).Informer(),
		leases:         coordinationinformers.NewLeaseInformer(kube, leaseNamespace, 0, toolscache.Indexers{}),
		leaseNamespace: leaseNamespace,
	}
	// Both only fail before the informers run.
	_ = r.targets.SetTransform(decodeSyncTarget)
	_ = r.leases.SetTransform(dropManagedFields)
	_ = r.targets.SetWatchErrorHandlerWithContext(logOncePerReason("SyncTargets", synctarget.Resource.GroupResource().String()))
	_ = r.leases.SetWatchErrorHandlerWithContext(logOncePerReason("Leases", "leases.coordination.k8s.io in "+leaseNamespace))
	return r
}

// Run runs the informers until ctx ends; it does not wait for them to sync.
func (r *Registrations) Run(ctx context.Context) {
	go r.targets.RunWithContext(ctx)
	go r.leases.RunWithContext(ctx)
}

// SyncTargets returns the SyncTargets the informer holds.
func (r *Registrations) SyncTargets() []*controlv1alpha1.SyncTarget {
	items := r.targets.GetStore().List()
	out := make([]*controlv1alpha1.SyncTarget, 0, len(items))
	for _, o := range items {
		if st, ok := o.(*controlv1alpha1.SyncTarget); ok {
			out = append(out, st)
		}
	}
	return out
}

// RenewTime returns the renewTime of the Lease named location, nil when there is none.
func (r *Registrations) RenewTime(location string) *metav1.MicroTime {
	o, ok, _ := r.leases.GetStore().GetByKey(r.leaseNamespace + "/" + location)
	if !ok {
		return nil
	}
	if l, ok := o.(*coordinationv1.Lease); ok {
		return l.Spec.RenewTime
	}
	return nil
}

// decodeSyncTarget is the SyncTarget informer's transform: it stores the Go type, decoded
// once per change rather than once per read. An object that does not decode (the CRD's schema
// makes that unlikely) is logged and stored as is; SyncTargets skips it.
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

// dropManagedFields is the Lease informer's transform: only renewTime is read.
func dropManagedFields(obj interface{}) (interface{}, error) {
	if l, ok := obj.(*coordinationv1.Lease); ok {
		l.ManagedFields = nil
	}
	return obj, nil
}

// logOncePerReason returns an informer watch error handler that logs a failure to list or
// watch what only when its reason (cache.SyncErrorReason: Forbidden, NotFound for a missing
// CRD, Unreachable ...) differs from the previous failure's, instead of client-go's default of
// one log line per retry; repeats are logged at level 4. Ordinary ends of a watch (EOF, an
// expired resourceVersion) go to client-go's default handler.
func logOncePerReason(what, resource string) toolscache.WatchErrorHandlerWithContext {
	var (
		mu   sync.Mutex
		last string
	)
	return func(ctx context.Context, r *toolscache.Reflector, err error) {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			toolscache.DefaultWatchErrorHandler(ctx, r, err)
			return
		}
		reason := cache.SyncErrorReason(err)
		mu.Lock()
		changed := reason != last
		last = reason
		mu.Unlock()
		if changed {
			klog.FromContext(ctx).Error(nil, "Cannot list or watch "+what+" of the source; the locations' registration columns stay empty until it works, nothing else is affected",
				"resource", resource, "reason", reason, "err", contract.Truncate(err.Error(), 512))
			return
		}
		klog.FromContext(ctx).V(4).Info("Still cannot list or watch "+what+" of the source", "resource", resource, "reason", reason, "err", err)
	}
}
