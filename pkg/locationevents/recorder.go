// Package locationevents records Events on source objects about what a location does with
// them, so that a location's trouble is visible at the source with `kubectl describe` and
// `kubectl events`:
//   - a deletion that waits for a location to delete its copy (docs/views.md, "Deletion"): at
//     most one Event per object and location;
//   - an apply outcome record a location writes through its view (docs/mapper.md, "Outcome
//     records": a conflict, a refused apply, a halted resource): at most one Warning Event per
//     object, location and reason.
//
// "At most one" holds whatever the number of mapper-apiserver replicas and restarts, because
// an Event's name is derived from the object's UID, the location (and the reason), and a
// second create of it answers AlreadyExists.
//
// The cache reports each (object, location) whose view starts showing the object deleting
// (cache.StoreOptions.DeletionPending); the Recorder waits Delay, and if the location still
// holds the object then (the location is slow, offline or gone), creates the Event in the
// object's namespace ("default" for a cluster-scoped object) of its logical cluster. A
// location that releases the object within Delay leaves no Event.
package locationevents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// Reason is the reason of the Events of pending deletions.
const Reason = "DeletionPending"

// reportingController names mapper-apiserver in the Events (events.k8s.io/v1
// reportingController, a qualified name).
const reportingController = "mapper.kcp.io/mapper-apiserver"

// eventsGVR is events.k8s.io/v1 events.
var eventsGVR = schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}

// Config configures a Recorder.
type Config struct {
	// Client returns the source's client of a logical cluster (writes of a kcp source go to
	// /clusters/<cluster>).
	Client func(cluster string) (dynamic.Interface, error)
	// Still reports whether the object still waits for the location (its view still shows it
	// deleting, same UID); the Recorder asks it after Delay.
	Still func(cache.PendingDeletion) bool
	// Kind returns the apiVersion and kind of a resource's objects, for the Event's regarding.
	Kind func(schema.GroupVersionResource) (apiVersion, kind string)
	// Delay is how long a location may take before its pending deletion is recorded; default
	// 5s.
	Delay time.Duration
	// Instance is the reportingInstance of the Events (the server's identity).
	Instance string
}

// Recorder writes the Events (see the package documentation). Pending is safe to call from
// the cache, with its locks held: it only queues.
type Recorder struct {
	cfg   Config
	queue workqueue.TypedRateLimitingInterface[item]
}

// item is one Event to record: of a pending deletion (Outcome empty), or of the outcome
// record with reason Outcome and message Message that p.Location wrote on p's object.
type item struct {
	cache.PendingDeletion
	Outcome, Message string
}

// Outcome is an apply outcome record a location wrote on a source object through its view
// (docs/mapper.md, "Outcome records").
type Outcome struct {
	// Object names the object (GVR, cluster, namespace, name, UID) and the location.
	Object cache.PendingDeletion
	// Reason and Message are the record's reason and message.
	Reason, Message string
}

// New returns a Recorder; Run starts it.
func New(cfg Config) *Recorder {
	if cfg.Delay <= 0 {
		cfg.Delay = 5 * time.Second
	}
	return &Recorder{cfg: cfg, queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[item](),
		workqueue.TypedRateLimitingQueueConfig[item]{Name: "deletion_pending_events"})}
}

// Pending queues p, to be recorded after Delay if it is still pending then.
func (r *Recorder) Pending(p cache.PendingDeletion) {
	klog.V(4).InfoS("A location's view shows an object deleting", "resource", p.GVR.String(), "namespace", p.Namespace, "name", p.Name, "location", p.Location)
	r.queue.AddAfter(item{PendingDeletion: p}, r.cfg.Delay)
}

// Recorded queues the Warning Event of outcome record o, to be recorded at once. It never
// blocks.
func (r *Recorder) Recorded(o Outcome) {
	r.queue.Add(item{PendingDeletion: o.Object, Outcome: o.Reason, Message: contract.Truncate(o.Message, 1024)})
}

// Run records until ctx ends, with one worker (Events are few: one per slow deletion or new
// outcome reason).
func (r *Recorder) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	for {
		p, shutdown := r.queue.Get()
		if shutdown {
			return
		}
		if err := r.record(ctx, p); err != nil {
			klog.FromContext(ctx).Info("Recording a pending deletion failed; retrying", "resource", p.GVR.String(), "namespace", p.Namespace, "name", p.Name, "location", p.Location, "err", err.Error())
			r.queue.AddRateLimited(p)
		} else {
			r.queue.Forget(p)
		}
		r.queue.Done(p)
	}
}

// record creates the Event of p: of an outcome record, or of a pending deletion when the object
// still waits for the location. An Event of that name that exists already (another replica,
// an earlier run) counts as recorded.
func (r *Recorder) record(ctx context.Context, p item) error {
	if p.Outcome == "" && r.cfg.Still != nil && !r.cfg.Still(p.PendingDeletion) {
		klog.FromContext(ctx).V(4).Info("A pending deletion finished within the delay; no Event", "resource", p.GVR.String(), "namespace", p.Namespace, "name", p.Name, "location", p.Location)
		return nil
	}
	client, err := r.cfg.Client(p.Cluster)
	if err != nil {
		return err
	}
	ns := p.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	_, err = client.Resource(eventsGVR).Namespace(ns).Create(ctx, r.event(p, ns), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err == nil {
		klog.FromContext(ctx).V(2).Info("Recorded an Event of a location", "resource", p.GVR.String(), "namespace", p.Namespace, "name", p.Name, "location", p.Location, "outcome", p.Outcome)
	}
	return err
}

// EventName returns the name of p's Event: the object's name (shortened) and a hash of its
// UID and the location, the same on every replica.
func EventName(p cache.PendingDeletion) string {
	sum := sha256.Sum256([]byte(string(p.UID) + "/" + p.Location))
	name := p.Name
	if len(name) > 200 {
		name = name[:200]
	}
	return name + ".deletion-" + hex.EncodeToString(sum[:8])
}

// OutcomeEventName returns the name of the Event of o: the object's name (shortened) and a
// hash of its UID, the location and the reason, the same on every replica.
func OutcomeEventName(o Outcome) string {
	sum := sha256.Sum256([]byte(string(o.Object.UID) + "/" + o.Object.Location + "/" + o.Reason))
	name := o.Object.Name
	if len(name) > 200 {
		name = name[:200]
	}
	return name + ".outcome-" + hex.EncodeToString(sum[:8])
}

// event builds p's events.k8s.io/v1 Event in namespace ns.
func (r *Recorder) event(p item, ns string) *unstructured.Unstructured {
	apiVersion, kind := "", ""
	if r.cfg.Kind != nil {
		apiVersion, kind = r.cfg.Kind(p.GVR)
	}
	regarding := map[string]interface{}{"apiVersion": apiVersion, "kind": kind, "name": p.Name, "uid": string(p.UID)}
	if p.Namespace != "" {
		regarding["namespace"] = p.Namespace
	}
	now := metav1.NowMicro()
	event := map[string]interface{}{
		"apiVersion":          "events.k8s.io/v1",
		"kind":                "Event",
		"metadata":            map[string]interface{}{"name": EventName(p.PendingDeletion), "namespace": ns},
		"eventTime":           now.Format(metav1.RFC3339Micro),
		"reportingController": reportingController,
		"reportingInstance":   r.cfg.Instance,
		"action":              "Delete",
		"reason":              Reason,
		"type":                "Normal",
		"regarding":           regarding,
	}
	if p.Outcome != "" {
		event["metadata"] = map[string]interface{}{"name": OutcomeEventName(Outcome{Object: p.PendingDeletion, Reason: p.Outcome}), "namespace": ns}
		event["action"], event["reason"], event["type"] = "Map", p.Outcome, "Warning"
		event["note"] = contract.Truncate(fmt.Sprintf("Location %s: %s (its outcome record %s)", p.Location, p.Message, contract.OutcomeAnnotation(p.Location)), 1024)
		return &unstructured.Unstructured{Object: event}
	}
	event["note"] = fmt.Sprintf("Waiting for location %s to delete its copy: the object keeps the finalizer %s until the location's mapper has deleted the copy from its target (or an administrator releases it, docs/mapper.md \"Deletion\")",
		p.Location, contract.LocationFinalizer(p.Location))
	return &unstructured.Unstructured{Object: event}
}
