package location

import (
	"context"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	sourceinformers "github.com/cluster-mapper/cluster-mapper/pkg/controller/informers"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/worker"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
)

// Event reasons of the controller (on the SyncTarget).
const (
	// EventLocationReady: Ready became True.
	EventLocationReady = "LocationReady"
	// EventLocationNotReady: Ready became False (the mapper's reason is in the note).
	EventLocationNotReady = "LocationNotReady"
	// EventLocationUnknown: Ready became Unknown (the Lease expired).
	EventLocationUnknown = "LocationStatusUnknown"
)

// Config configures a Controller.
type Config struct {
	// Kube and Dynamic are clients of the source.
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Informers is the process's shared informers of the source: the SyncTarget informer
	// is its (one watch of SyncTargets for every controller of the process). The Controller
	// starts it.
	Informers *sourceinformers.Set
	// LeaseNamespace is where the locations' Leases are; default cluster-mapper-system.
	LeaseNamespace string
	// GracePeriod is how long a Lease may go unrenewed before Ready becomes Unknown;
	// default 40s (--location-grace-period, as node lifecycle's node-monitor-grace-period).
	GracePeriod time.Duration
	// Workers is the number of concurrent reconciles; default 2.
	Workers int
	// Recorder records the Events; nil records none.
	Recorder events.EventRecorder
	// Clock is the time source; default the real clock.
	Clock clock.Clock
	// Metadata and Discovery are clients of the source with which a deleted SyncTarget's
	// location is retired (its finalizers released, retire.go); nil retires nothing.
	Metadata  metadata.Interface
	Discovery discovery.DiscoveryInterface
}

// Controller is the location lifecycle controller.
type Controller struct {
	cfg         Config
	client      *synctarget.Client
	targets     cache.SharedIndexInformer
	leases      cache.SharedIndexInformer
	leaseLister coordinationlisters.LeaseLister
	queue       workqueue.TypedRateLimitingInterface[string]
	factories   []interface{ Start(<-chan struct{}) }
}

// New builds a Controller with its informers (SyncTargets, and Leases of LeaseNamespace).
func New(cfg Config) *Controller {
	if cfg.LeaseNamespace == "" {
		cfg.LeaseNamespace = contract.ControlNamespace
	}
	if cfg.GracePeriod <= 0 {
		cfg.GracePeriod = 40 * time.Second
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	kubeFactory := informers.NewSharedInformerFactoryWithOptions(cfg.Kube, 0, informers.WithNamespace(cfg.LeaseNamespace))
	c := &Controller{
		cfg:         cfg,
		client:      synctarget.NewClient(cfg.Dynamic),
		targets:     cfg.Informers.Informer(synctarget.Resource),
		leases:      kubeFactory.Coordination().V1().Leases().Informer(),
		leaseLister: kubeFactory.Coordination().V1().Leases().Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "location_lifecycle"}),
		factories: []interface{ Start(<-chan struct{}) }{kubeFactory},
	}
	_, _ = c.targets.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: c.targetUpdated,
		DeleteFunc: c.targetDeleted,
	})
	_, _ = c.leases.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj interface{}) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	})
	return c
}

// enqueue adds the name of a SyncTarget or Lease (the location; a shard's Lease
// "<location>.<shard>" names its location before the dot) to the queue.
func (c *Controller) enqueue(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	c.queue.Add(contract.LocationOfLease(m.GetName()))
}

// targetUpdated records an Event when a SyncTarget's Ready condition changed status, by
// whoever changed it (the mapper, or this controller), and enqueues it.
func (c *Controller) targetUpdated(old, obj interface{}) {
	c.enqueue(obj)
	if c.cfg.Recorder == nil {
		return
	}
	before, after := readyOf(old), readyOf(obj)
	if after == nil || (before != nil && before.Status == after.Status) {
		return
	}
	st, err := synctarget.FromUnstructured(obj.(*unstructured.Unstructured))
	if err != nil {
		return
	}
	switch after.Status {
	case "True":
		c.cfg.Recorder.Eventf(st, nil, "Normal", EventLocationReady, "Ready", "Location %s is ready: %s", st.Name, after.Message)
	case "False":
		c.cfg.Recorder.Eventf(st, nil, "Warning", EventLocationNotReady, "NotReady", "Location %s is not ready (%s): %s", st.Name, after.Reason, after.Message)
	default:
		c.cfg.Recorder.Eventf(st, nil, "Warning", EventLocationUnknown, "NotReady", "Location %s's status is unknown (%s): %s", st.Name, after.Reason, after.Message)
	}
}

// readyOf returns the Ready condition of an unstructured SyncTarget, or nil.
func readyOf(obj interface{}) *struct{ Status, Reason, Message string } {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]interface{})
		if !ok || m["type"] != controlv1alpha1.SyncTargetReady {
			continue
		}
		s, _ := m["status"].(string)
		r, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		return &struct{ Status, Reason, Message string }{s, r, msg}
	}
	return nil
}

// Run starts the informers and workers and returns when ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx)
	for _, f := range c.factories {
		f.Start(ctx.Done())
	}
	c.cfg.Informers.Start(ctx)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.targets.HasSynced, c.leases.HasSynced) {
		return
	}
	logger.Info("Starting the location lifecycle controller", "gracePeriod", c.cfg.GracePeriod, "leaseNamespace", c.cfg.LeaseNamespace)
	worker.Run(ctx, c.queue, c.cfg.Workers, "the location", c.reconcile)
}

// reconcile retires a location whose SyncTarget was deleted (a retire: item, retire.go), and
// otherwise sets Ready=Unknown on the SyncTarget name when its Lease is missing or expired,
// and otherwise re-checks the location when the Lease would expire.
func (c *Controller) reconcile(ctx context.Context, name string) error {
	if location, ok := strings.CutPrefix(name, retireKeyPrefix); ok {
		return c.retire(ctx, location)
	}
	obj, exists, err := c.targets.GetStore().GetByKey(name)
	if err != nil || !exists {
		return err
	}
	st, err := synctarget.FromUnstructured(obj.(*unstructured.Unstructured))
	if err != nil {
		return nil // a malformed object is reported by its own update; nothing to retry
	}
	h, err := c.health(name, st)
	if err != nil {
		return err
	}
	if h.Fresh {
		// The Lease may expire without any further event: look again just after it would.
		c.queue.AddAfter(name, h.RecheckAfter+100*time.Millisecond)
		return nil
	}
	cur := meta.FindStatusCondition(st.Status.Conditions, controlv1alpha1.SyncTargetReady)
	if cur != nil && cur.Status == h.Unknown.Status && cur.Reason == h.Unknown.Reason {
		return nil
	}
	if keepsNotReady(st, cur) {
		return nil
	}
	meta.SetStatusCondition(&st.Status.Conditions, h.Unknown)
	if _, err := c.client.UpdateStatus(ctx, st); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("setting Ready=Unknown: %w", err)
	}
	klog.FromContext(ctx).Info("The location's mapper stopped renewing its Lease: Ready=Unknown", "location", name, "reason", h.Unknown.Reason)
	return nil
}

// health judges the Leases of location: its own, and when several mappers share it (the
// SyncTarget's status.shards) each shard's (contract.ShardLeaseName). The location is fresh
// while any of them is: a live shard's mapper reports the missing ones itself (Ready False,
// ShardsNotReady, synctarget.SumShards), so Unknown is for a location none of whose mappers
// renews a Lease; it is then judged by the most recently renewed Lease.
func (c *Controller) health(location string, st *controlv1alpha1.SyncTarget) (LeaseHealth, error) {
	names := []string{location}
	for _, s := range st.Status.Shards {
		if part, err := contract.ParseViewPartName(s.Name); err == nil && !part.Whole() {
			names = append(names, contract.ShardLeaseName(location, part))
		}
	}
	now := c.cfg.Clock.Now()
	var best *coordinationv1.Lease
	var fresh *LeaseHealth
	for _, n := range names {
		lease, err := c.leaseLister.Leases(c.cfg.LeaseNamespace).Get(n)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return LeaseHealth{}, err
		}
		if h := Health(lease, now, c.cfg.GracePeriod); h.Fresh && (fresh == nil || h.RecheckAfter > fresh.RecheckAfter) {
			fresh = &h
		}
		if best == nil || renewedAfter(lease, best) {
			best = lease
		}
	}
	if fresh != nil {
		return *fresh, nil
	}
	return Health(best, now, c.cfg.GracePeriod), nil
}

// renewedAfter reports whether a was renewed after b (a Lease never renewed is the oldest).
func renewedAfter(a, b *coordinationv1.Lease) bool {
	switch {
	case a.Spec.RenewTime == nil:
		return false
	case b.Spec.RenewTime == nil:
		return true
	}
	return a.Spec.RenewTime.After(b.Spec.RenewTime.Time)
}

// keepsNotReady reports whether a push-mode location's Ready=False says more than Unknown
// would: mapper-controller's push controller set it because no mapper can run (the
// kubeconfig Secret is missing, not allowed or invalid), so no Lease is renewed on purpose.
func keepsNotReady(st *controlv1alpha1.SyncTarget, cur *metav1.Condition) bool {
	if st.Spec.KubeconfigSecretRef == nil || cur == nil || cur.Status != metav1.ConditionFalse {
		return false
	}
	switch cur.Reason {
	case controlv1alpha1.ReasonKubeconfigSecretMissing, controlv1alpha1.ReasonKubeconfigInvalid, controlv1alpha1.ReasonKubeconfigSecretNotAllowed:
		return true
	}
	return false
}
