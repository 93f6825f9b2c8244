// Package statusrecords is mapper-controller's status record controller (docs/status.md): it
// keeps the per-location status records (status.kcp.io/<location>, contract.StatusRecord) on
// source objects in step with the objects' assignments, and the source's .status with the
// records:
//   - a replica kind with kcp.io/status-policy: Summarize assigned to several locations: .status
//     is the summary of the locations' records (Summarize), with the generation every location
//     observed (ObservedGeneration);
//   - assigned to several locations: .status is the record of the location named by
//     kcp.io/status-location, when that location is assigned and has a record;
//   - assigned to one location with a record: the record is folded into .status (the view shows
//     the record until then) and removed;
//   - the records of locations the object is not assigned to are removed, and so are their
//     apply outcome records (outcome.kcp.io/<location>, docs/mapper.md "Outcome records"),
//     unless the location still holds its finalizer on the object (its view still shows the
//     object, and its mapper removes the record with the finalizer).
//
// It runs under mapper-controller's leader election: one writer at a time, as every
// controller of the source's objects. The objects it looks at come from the metadata
// informers of pkg/controller/mirror (their events drive it); it reads an object in full from
// the source only when its records or status need work, and every write carries that read's
// resourceVersion as precondition, so a newer source object is never overwritten (a conflict is
// retried with backoff).
package statusrecords

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/workqueue"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/worker"
)

// fieldManager names the controller's writes on the source.
const fieldManager = "mapper-controller-status-records"

// Objects is where the controller finds the source objects' metadata: *mirror.Mirror.
type Objects interface {
	// Get returns the object of gvr with key (its metadata: annotations at least).
	Get(gvr schema.GroupVersionResource, key contract.Key) (*metav1.PartialObjectMetadata, bool)
}

// Config configures a Controller.
type Config struct {
	// Objects holds the source objects' metadata; its change events go to Controller.Enqueue.
	Objects Objects
	// Writers returns the client of one logical cluster of the source (reads by name and
	// writes; sourcecluster.Options.Writers).
	Writers func(cluster string) (dynamic.Interface, error)
	// Views returns the client of location's view path of one logical cluster
	// (contract.ViewPath), from which the Summarize policy reads the generation each view
	// shows.
	Views func(location, cluster string) (dynamic.Interface, error)
	// HasStatus reports whether gvr has a status subresource on the source (where .status
	// is written; without one, .status is part of the main resource).
	HasStatus func(gvr schema.GroupVersionResource) (bool, error)
	// Workers is the number of objects reconciled at once.
	Workers int
	// Bound, when set (the Bound location-access mode, docs/tenancy.md), returns the
	// locations of an object's assignment that are bound to its namespace (in cluster): the
	// object is assigned to those only, as the views see it, so the records of the others are
	// removed and the Summarize policy summarizes the bound ones. It must answer from synced
	// LocationBindings only. nil: every location (the Open mode).
	Bound func(cluster, namespace string, locations []string) []string
}

// Controller reconciles the status records of the objects Enqueue is given.
type Controller struct {
	cfg   Config
	queue workqueue.TypedRateLimitingInterface[string]
}

// New returns a Controller; Run starts it.
func New(cfg Config) *Controller {
	if cfg.Workers < 1 {
		cfg.Workers = 1
	}
	return &Controller{cfg: cfg, queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "status_records"})}
}

// Enqueue queues the object of gvr with key when its metadata says its records or status may
// need work (NeedsWork); obj nil (a deletion) queues nothing. It is the mirror's OnChange: it
// never blocks.
func (c *Controller) Enqueue(gvr schema.GroupVersionResource, key contract.Key, obj *metav1.PartialObjectMetadata) {
	if obj == nil || !NeedsWork(obj.Annotations) {
		return
	}
	c.queue.Add(itemOf(gvr, key))
}

// NeedsWork reports whether a source object with these annotations may have status records,
// outcome records or a .status to bring in step: it carries status or outcome records, or it
// reflects status (contract.ReflectsStatus) while assigned to several locations. The objects
// it excludes have nothing the controller would write.
func NeedsWork(annotations map[string]string) bool {
	if contract.HasStatusRecords(annotations) || contract.HasOutcomeRecords(annotations) {
		return true
	}
	if !contract.ReflectsStatus(annotations) {
		return false
	}
	locations, err := contract.ParseLocations(annotations[contract.AssignedLocationsAnnotation])
	return err == nil && len(locations) > 1
}

// Run reconciles queued objects with Config.Workers workers until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	worker.Run(ctx, c.queue, c.cfg.Workers, "status records", c.reconcileItem)
}

// itemOf is the queue item of an object: "<group>/<version>/<resource> <key>" (a resource has no
// space in its name).
func itemOf(gvr schema.GroupVersionResource, key contract.Key) string {
	return gvr.Group + "/" + gvr.Version + "/" + gvr.Resource + " " + string(key)
}

// parseItem is the reverse of itemOf.
func parseItem(item string) (schema.GroupVersionResource, contract.Key, error) {
	r, key, ok := strings.Cut(item, " ")
	parts := strings.Split(r, "/")
	if !ok || len(parts) != 3 {
		return schema.GroupVersionResource{}, "", fmt.Errorf("malformed queue item %q", item)
	}
	return schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]}, contract.Key(key), nil
}
