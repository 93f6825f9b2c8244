package push

import (
	"context"
	"fmt"
	"os"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	sourceinformers "github.com/cluster-mapper/cluster-mapper/pkg/controller/informers"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/worker"
	mapperapp "github.com/cluster-mapper/cluster-mapper/pkg/mapper/app"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
)

// Event reasons of the controller (on the SyncTarget).
const (
	// EventMapperStarted: an in-process mapper started for the location.
	EventMapperStarted = "PushMapperStarted"
	// EventMapperRestarted: the in-process mapper restarted, with the Secret's new kubeconfig
	// or after it failed.
	EventMapperRestarted = "PushMapperRestarted"
	// EventMapperStopped: the in-process mapper stopped (the note says why); its copies stay
	// on the target.
	EventMapperStopped = "PushMapperStopped"
	// EventMapperFailed: the in-process mapper returned an error; it is restarted with backoff.
	EventMapperFailed = "PushMapperFailed"
)

// Config configures a Controller.
type Config struct {
	// Kube and Dynamic are mapper-controller's clients of the source.
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Informers is the process's shared informers of the source: the SyncTarget informer
	// is its (one watch of SyncTargets for every controller of the process). The Controller
	// starts it.
	Informers *sourceinformers.Set
	// Source is mapper-controller's client config of the source. An in-process mapper reads
	// its view at Source's host plus the view path (through the source's aggregator), and
	// renews its Lease and writes its SyncTarget status there, with these credentials.
	Source *rest.Config
	// SecretNamespace is the only namespace kubeconfig Secrets are read from; default
	// cluster-mapper-system. A reference to another namespace sets Ready=False
	// (KubeconfigSecretNotAllowed).
	SecretNamespace string
	// Connection, RunOptions and Heartbeat are the settings of every in-process mapper, as
	// cmd/mapper's flags of the same names; Connection's kubeconfig paths and location are
	// ignored (they come from the SyncTarget). Heartbeat.Register should be true.
	Connection *mapperapp.ConnectionOptions
	RunOptions *mapperapp.RunOptions
	Heartbeat  *mapperapp.HeartbeatOptions
	// AllowProxyURL lets a kubeconfig Secret name a proxy (proxy-url) that the in-process
	// mapper connects to the target through; without it such a kubeconfig is refused
	// (KubeconfigInvalid).
	AllowProxyURL bool
	// Workers is the number of concurrent reconciles; default 2.
	Workers int
	// Recorder records the Events; nil records none.
	Recorder events.EventRecorder
}

// Controller runs one in-process mapper per push-mode SyncTarget.
type Controller struct {
	cfg          Config
	client       *synctarget.Client
	targets      cache.SharedIndexInformer
	secrets      cache.SharedIndexInformer
	secretLister corelisters.SecretLister
	queue        workqueue.TypedRateLimitingInterface[string]
	factories    []interface{ Start(<-chan struct{}) }
	mappers      *mappers
}

// bySecret indexes SyncTargets by "namespace/name" of their kubeconfig Secret.
const bySecret = "kubeconfigSecret"

// New builds a Controller with its informers: SyncTargets, and Secrets of SecretNamespace.
func New(cfg Config) *Controller {
	if cfg.SecretNamespace == "" {
		cfg.SecretNamespace = contract.ControlNamespace
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	registerMetrics()
	kubeFactory := informers.NewSharedInformerFactoryWithOptions(cfg.Kube, 0, informers.WithNamespace(cfg.SecretNamespace))
	c := &Controller{
		cfg:          cfg,
		client:       synctarget.NewClient(cfg.Dynamic),
		targets:      cfg.Informers.Informer(synctarget.Resource),
		secrets:      kubeFactory.Core().V1().Secrets().Informer(),
		secretLister: kubeFactory.Core().V1().Secrets().Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "push_mappers"}),
		factories: []interface{ Start(<-chan struct{}) }{kubeFactory},
		mappers:   newMappers(),
	}
	_ = c.targets.AddIndexers(cache.Indexers{bySecret: secretIndex})
	_, _ = c.targets.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		// Status writes (every heartbeat) do not change the generation: only spec changes
		// and deletion matter here.
		UpdateFunc: func(old, obj interface{}) {
			o, n := old.(*unstructured.Unstructured), obj.(*unstructured.Unstructured)
			if o.GetGeneration() != n.GetGeneration() || (o.GetDeletionTimestamp() == nil) != (n.GetDeletionTimestamp() == nil) {
				c.enqueue(obj)
			}
		},
		DeleteFunc: c.enqueue,
	})
	_, _ = c.secrets.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.secretChanged,
		UpdateFunc: func(_, obj interface{}) { c.secretChanged(obj) },
		DeleteFunc: c.secretChanged,
	})
	return c
}

// secretIndex is the bySecret index function.
func secretIndex(obj interface{}) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	ns, _, _ := unstructured.NestedString(u.Object, "spec", "kubeconfigSecretRef", "namespace")
	name, _, _ := unstructured.NestedString(u.Object, "spec", "kubeconfigSecretRef", "name")
	if name == "" {
		return nil, nil
	}
	return []string{ns + "/" + name}, nil
}

// enqueue adds a SyncTarget's name to the queue.
func (c *Controller) enqueue(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if m, err := meta.Accessor(obj); err == nil {
		c.queue.Add(m.GetName())
	}
}

// secretChanged enqueues the SyncTargets that refer to a Secret.
func (c *Controller) secretChanged(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	users, _ := c.targets.GetIndexer().ByIndex(bySecret, m.GetNamespace()+"/"+m.GetName())
	for _, u := range users {
		c.enqueue(u)
	}
}

// Run starts the informers and workers and returns when ctx ends, after every in-process
// mapper has stopped.
func (c *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx)
	for _, f := range c.factories {
		f.Start(ctx.Done())
	}
	c.cfg.Informers.Start(ctx)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.targets.HasSynced, c.secrets.HasSynced) {
		return
	}
	logger.Info("Starting the push mode controller", "secretNamespace", c.cfg.SecretNamespace)
	worker.Run(ctx, c.queue, c.cfg.Workers, "the push-mode location", c.reconcile)
	c.mappers.stopAll(klog.NewContext(context.Background(), logger))
}

// reconcile makes the location's in-process mapper match its SyncTarget and Secret: none
// for a deleted or pull-mode SyncTarget or an unusable Secret (then Ready=False with the
// reason), one running with the Secret's current kubeconfig otherwise.
func (c *Controller) reconcile(ctx context.Context, name string) error {
	obj, exists, err := c.targets.GetStore().GetByKey(name)
	if err != nil {
		return err
	}
	if !exists {
		c.stop(ctx, name, reasonDeleted, nil)
		return nil
	}
	st, err := synctarget.FromUnstructured(obj.(*unstructured.Unstructured))
	if err != nil {
		return nil // malformed: nothing to retry until it changes
	}
	switch {
	case st.DeletionTimestamp != nil:
		c.stop(ctx, name, reasonDeleted, st)
		return nil
	case st.Spec.KubeconfigSecretRef == nil:
		c.stop(ctx, name, reasonPullMode, st)
		return nil
	}
	target, hash, notReady, err := c.targetFor(st.Spec.KubeconfigSecretRef)
	if err != nil {
		return err
	}
	if notReady != nil {
		c.stop(ctx, name, notReady.Reason, st)
		return c.setNotReady(ctx, st, *notReady)
	}
	r := c.mappers.get(name)
	switch {
	case r == nil:
		return c.start(ctx, st, target, hash, reasonStarted)
	case r.exited():
		c.mappers.stop(ctx, name, reasonExited)
		return c.start(ctx, st, target, hash, reasonExited)
	case r.hash != hash:
		c.mappers.stop(ctx, name, reasonKubeconfigChanged)
		return c.start(ctx, st, target, hash, reasonKubeconfigChanged)
	}
	return nil
}

// targetFor returns the target's client config and kubeconfig hash from the referenced
// Secret, or the Ready=False condition saying why it cannot be used; err is a lister error
// worth retrying.
func (c *Controller) targetFor(ref *controlv1alpha1.SecretReference) (*rest.Config, string, *metav1.Condition, error) {
	notReady := func(reason, format string, args ...interface{}) *metav1.Condition {
		return &metav1.Condition{Type: controlv1alpha1.SyncTargetReady, Status: metav1.ConditionFalse, Reason: reason,
			Message: fmt.Sprintf(format, args...) + " No mapper runs for the location; nothing is deleted on its target."}
	}
	if ref.Namespace != c.cfg.SecretNamespace {
		return nil, "", notReady(controlv1alpha1.ReasonKubeconfigSecretNotAllowed,
			"spec.kubeconfigSecretRef names the namespace %q; mapper-controller reads kubeconfig Secrets only in %q (--push-secret-namespace).", ref.Namespace, c.cfg.SecretNamespace), nil
	}
	key := secretKey(ref)
	secret, err := c.secretLister.Secrets(ref.Namespace).Get(ref.Name)
	if apierrors.IsNotFound(err) {
		return nil, "", notReady(controlv1alpha1.ReasonKubeconfigSecretMissing, "The kubeconfig Secret %s/%s does not exist.", ref.Namespace, ref.Name), nil
	}
	if err != nil {
		return nil, "", nil, err
	}
	if _, ok := secret.Data[key]; !ok {
		return nil, "", notReady(controlv1alpha1.ReasonKubeconfigSecretMissing, "The kubeconfig Secret %s/%s has no key %q.", ref.Namespace, ref.Name, key), nil
	}
	cfg, hash, err := TargetConfig(secret, key, c.cfg.AllowProxyURL)
	if err != nil {
		return nil, "", notReady(controlv1alpha1.ReasonKubeconfigInvalid, "%s.", contract.Truncate(err.Error(), 512)), nil
	}
	return cfg, hash, nil, nil
}

// start starts the location's in-process mapper with target, recording why.
func (c *Controller) start(ctx context.Context, st *controlv1alpha1.SyncTarget, target *rest.Config, hash, reason string) error {
	name := st.Name
	view := rest.CopyConfig(c.cfg.Source)
	view.Host = strings.TrimSuffix(c.cfg.Source.Host, "/") + contract.ViewPath(name, "")
	view.APIPath = ""
	conn := *c.cfg.Connection
	conn.Location, conn.ViewKubeconfig, conn.TargetKubeconfig = name, "", ""
	clients, err := conn.ClientsFor("cluster-mapper/mapper-controller (push)", view, target)
	if err != nil {
		return fmt.Errorf("the in-process mapper's clients: %w", err)
	}
	host, _ := os.Hostname()
	mc := mapperapp.MapperConfig{
		Connection: &conn, Clients: clients, RunOptions: c.cfg.RunOptions, Heartbeat: c.cfg.Heartbeat,
		Identity: host + "_" + string(uuid.NewUUID()), Mode: controlv1alpha1.ModePush,
	}
	logger := klog.FromContext(ctx).WithValues("location", name, "mode", controlv1alpha1.ModePush)
	regarding := st.DeepCopy()
	// ctx is the controller's Run context (workers get it unchanged): the mapper runs until
	// stopped or until the controller stops.
	c.mappers.start(klog.NewContext(ctx, logger), name, hash, mc.Run, func(err error) {
		// The error (a dial error to the target, say) stays in the log: Events are read by
		// more people than the Secret's writer, who could otherwise probe addresses with it.
		logger.Error(err, "The in-process mapper failed; restarting it with backoff")
		c.event(regarding, "Warning", EventMapperFailed, "The in-process mapper of location %s failed; mapper-controller's log says why. It is restarted with backoff.", name)
		c.queue.AddRateLimited(name)
	})
	mapperStarts.WithLabelValues(name, reason).Inc()
	logger.Info("Started the in-process mapper", "reason", reason, "target", target.Host, "identity", mc.Identity)
	if reason == reasonStarted {
		c.event(regarding, "Normal", EventMapperStarted, "Started the in-process mapper of location %s for the target %s.", name, target.Host)
	} else {
		c.event(regarding, "Normal", EventMapperRestarted, "Restarted the in-process mapper of location %s (%s) for the target %s.", name, reason, target.Host)
	}
	return nil
}

// stop stops the location's in-process mapper, if any, and records why; st (nil when the
// SyncTarget is gone) is what the Event is about.
func (c *Controller) stop(ctx context.Context, name, reason string, st *controlv1alpha1.SyncTarget) {
	if !c.mappers.stop(ctx, name, reason) {
		return
	}
	if st == nil {
		st = &controlv1alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	c.event(st, "Normal", EventMapperStopped, "Stopped the in-process mapper of location %s (%s); its copies stay on the target.", name, reason)
}

// event records an Event about st when there is a recorder.
func (c *Controller) event(st *controlv1alpha1.SyncTarget, eventType, reason, format string, args ...interface{}) {
	if c.cfg.Recorder == nil {
		return
	}
	st = st.DeepCopy()
	st.APIVersion, st.Kind = controlv1alpha1.SchemeGroupVersion.String(), "SyncTarget"
	c.cfg.Recorder.Eventf(st, nil, eventType, reason, "Map", format, args...)
}

// setNotReady writes cond as the SyncTarget's Ready condition unless it is already there.
func (c *Controller) setNotReady(ctx context.Context, st *controlv1alpha1.SyncTarget, cond metav1.Condition) error {
	cur := meta.FindStatusCondition(st.Status.Conditions, controlv1alpha1.SyncTargetReady)
	if cur != nil && cur.Status == cond.Status && cur.Reason == cond.Reason && cur.Message == cond.Message {
		return nil
	}
	st = st.DeepCopy()
	meta.SetStatusCondition(&st.Status.Conditions, cond)
	if _, err := c.client.UpdateStatus(ctx, st); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("setting Ready=False (%s): %w", cond.Reason, err)
	}
	klog.FromContext(ctx).Info("The push-mode location cannot run a mapper: Ready=False", "location", st.Name, "reason", cond.Reason, "message", cond.Message)
	return nil
}
