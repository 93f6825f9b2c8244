package binding

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/worker"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
)

// FieldManager names the Controller's writes.
const FieldManager = "mapper-controller-location-binding"

// maxListedLocations is how many bound locations a status lists (the CRD's maxItems).
const maxListedLocations = 100

// Controller keeps the status of every LocationBinding: observedGeneration, the Ready
// condition (True, reason Bound; False, reason InvalidSpec, when the spec does not compile:
// the binding then binds nothing), the first 100 bound locations and their number. It
// reconciles a binding when it changes and every binding when the Index changes (a SyncTarget
// added, deleted or relabelled), and writes only what changed.
type Controller struct {
	dyn     dynamic.Interface
	tracker *Tracker
	workers int
	queue   workqueue.TypedRateLimitingInterface[string]
}

// New returns a Controller writing with dyn, reading the Tracker's informers (add its
// handlers before the informers start); Run starts it.
func New(dyn dynamic.Interface, tracker *Tracker, workers int) *Controller {
	if workers <= 0 {
		workers = 1
	}
	c := &Controller{dyn: dyn, tracker: tracker, workers: workers,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "locationbinding"})}
	enqueue := func(obj interface{}) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			c.queue.Add(queueKey(keyOf(u)))
		}
	}
	_, _ = tracker.bindings.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj interface{}) { enqueue(obj) }, DeleteFunc: enqueue,
	})
	tracker.OnChange(func() {
		for _, u := range tracker.Bindings() {
			c.queue.Add(queueKey(keyOf(u)))
		}
	})
	return c
}

// Run reconciles until ctx ends, once the informers have synced.
func (c *Controller) Run(ctx context.Context) {
	if !toolscache.WaitForCacheSync(ctx.Done(), c.tracker.HasSynced) {
		return
	}
	worker.Run(ctx, c.queue, c.workers, "the status of a LocationBinding", c.reconcile)
}

// queueKey is "<cluster>|<namespace>/<name>".
func queueKey(k locationbinding.Key) string { return k.Cluster + "|" + k.Namespace + "/" + k.Name }

// reconcile writes the status of the LocationBinding k when it changed.
func (c *Controller) reconcile(ctx context.Context, k string) error {
	cluster, rest, _ := strings.Cut(k, "|")
	namespace, name, _ := strings.Cut(rest, "/")
	var u *unstructured.Unstructured
	objs, _ := c.tracker.bindings.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace)
	for _, obj := range objs {
		if o, ok := obj.(*unstructured.Unstructured); ok && o.GetName() == name && o.GetAnnotations()[contract.ClusterAnnotation] == cluster {
			u = o
		}
	}
	if u == nil || u.GetDeletionTimestamp() != nil {
		return nil
	}
	var b controlv1alpha1.LocationBinding
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
		return nil // the CRD's schema makes this impossible; nothing to report it on
	}
	x := c.tracker.Index()
	key := keyOf(u)
	next := statusOf(&b, x.Binding(key), x)
	if equality.Semantic.DeepEqual(b.Status, next) {
		return nil
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&next)
	if err != nil {
		return err
	}
	u = u.DeepCopy()
	u.Object["status"] = obj
	_, err = c.dyn.Resource(locationbinding.Resource).Namespace(namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: FieldManager})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or a newer version is on its way to the informer (and the queue)
	}
	return err
}

// statusOf returns b's status under the Index x, whose compiled binding of b is compiled
// (nil when the Index does not hold it yet: the status is left as it is). Conditions keep
// their lastTransitionTime when their status does not change.
func statusOf(b *controlv1alpha1.LocationBinding, compiled *locationbinding.Binding, x *locationbinding.Index) controlv1alpha1.LocationBindingStatus {
	if compiled == nil {
		return b.Status
	}
	st := controlv1alpha1.LocationBindingStatus{ObservedGeneration: b.Generation, Conditions: append([]metav1.Condition(nil), b.Status.Conditions...)}
	cond := metav1.Condition{Type: controlv1alpha1.LocationBindingReady, ObservedGeneration: b.Generation}
	if err := compiled.Err(); err != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, controlv1alpha1.ReasonInvalidSpec, contract.Truncate(err.Error(), 1024)
		meta.SetStatusCondition(&st.Conditions, cond)
		return st
	}
	names, _ := x.Selected(compiled.Key)
	cond.Status, cond.Reason = metav1.ConditionTrue, controlv1alpha1.ReasonBound
	cond.Message = fmt.Sprintf("binds %d locations to namespace %s", len(names), b.Namespace)
	if b.Namespace == locationbinding.ClusterScopedNamespace {
		cond.Message += " and to the cluster-scoped objects"
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	st.Locations = names[:min(len(names), maxListedLocations)]
	st.BoundLocations = int64(len(names))
	return st
}
