// Package deletionevents records, on a source object that waits for a location to delete its
// copy, an Event naming that location (docs/views.md, "Deletion"): at most one per object and
// location, whatever the number of mapper-apiserver replicas and restarts, because its name
// is derived from the object's UID and the location and a second create of it answers
// AlreadyExists.
//
// The cache reports each (object, location) whose view starts showing the object deleting
// (cache.StoreOptions.DeletionPending); the Recorder waits Delay, and if the location still
// holds the object then (the location is slow, offline or gone), creates the Event in the
// object's namespace ("default" for a cluster-scoped object) of its logical cluster. A
// location that releases the object within Delay leaves no Event.
package deletionevents

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

// Reason is the reason of the Events the Recorder writes.
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
	queue workqueue.TypedRateLimitingInterface[cache.PendingDeletion]
}

// New returns a Recorder; Run starts it.
func New(cfg Config) *Recorder {
	if cfg.Delay <= 0 {
		cfg.Delay = 5 * time.Second
	}
	return &Recorder{cfg: cfg, queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[cache.PendingDeletion](),
		workqueue.TypedRateLimitingQueueConfig[cache.PendingDeletion]{Name: "deletion_pending_events"})}
}

// Pending queues p, to be recorded after Delay if it is still pending then.
func (r *Recorder) Pending(p cache.PendingDeletion) {
	klog.V(4).InfoS("A location's view shows an object deleting", "resource", p.GVR.String(), "namespace", p.Namespace, "name", p.Name, "location", p.Location)
	r.queue.AddAfter(p, r.cfg.Delay)
}

// Run records until ctx ends, with one worker (Events are few: one per slow deletion).
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

// record creates the Event of p when the object still waits for the location. An Event of
// that name that exists already (another replica, an earlier run) counts as recorded.
func (r *Recorder) record(ctx context.Context, p cache.PendingDeletion) error {
	if r.cfg.Still != nil && !r.cfg.Still(p) {
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
		klog.FromContext(ctx).V(2).Info("Recorded a pending deletion", "resource", p.GVR.String(), "namespace", p.Namespace, "name", p.Name, "location", p.Location)
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

// event builds p's events.k8s.io/v1 Event in namespace ns.
func (r *Recorder) event(p cache.PendingDeletion, ns string) *unstructured.Unstructured {
	apiVersion, kind := "", ""
	if r.cfg.Kind != nil {
		apiVersion, kind = r.cfg.Kind(p.GVR)
	}
	regarding := map[string]interface{}{"apiVersion": apiVersion, "kind": kind, "name": p.Name, "uid": string(p.UID)}
	if p.Namespace != "" {
		regarding["namespace"] = p.Namespace
	}
	now := metav1.NowMicro()
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion":          "events.k8s.io/v1",
		"kind":                "Event",
		"metadata":            map[string]interface{}{"name": EventName(p), "namespace": ns},
		"eventTime":           now.Format(metav1.RFC3339Micro),
		"reportingController": reportingController,
		"reportingInstance":   r.cfg.Instance,
		"action":              "Delete",
		"reason":              Reason,
		"type":                "Normal",
		"regarding":           regarding,
		"note": fmt.Sprintf("Waiting for location %s to delete its copy: the object keeps the finalizer %s until the location's mapper has deleted the copy from its target (or an administrator releases it, docs/mapper.md \"Deletion\")",
			p.Location, contract.LocationFinalizer(p.Location)),
	}}
}
