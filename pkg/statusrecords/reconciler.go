// Package statusrecords keeps the per-location status records on source objects in step with
// the objects' assignments (docs/design.md, "Names"): a record of a
// location the object is no longer assigned to is removed, and the source's .status follows
// the location named by kcp.io/status-location.
package statusrecords

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// fieldManager names the reconciler's writes on the source.
const fieldManager = "mapper-apiserver-status-records"

// Cache is what the reconciler reads: the mirrored resources and their stores. *cache.Cache
// implements it.
type Cache interface {
	Resources() []source.ResourceInfo
	Store(gvr schema.GroupVersionResource) (*cache.ResourceStore, bool)
}

// Writer is what the reconciler writes through. *source.Source implements it.
type Writer interface {
	// ClusterResource returns a client of gvr in namespace of one logical cluster of the
	// source (on a kcp source, under /clusters/<cluster>: kcp accepts writes only there).
	ClusterResource(gvr schema.GroupVersionResource, cluster, namespace string) (dynamic.ResourceInterface, error)
}

// Reconciler visits, every interval, the cached objects that carry status records or reflect
// status across several locations (cache.ResourceStore.StatusObjects, not the whole cache),
// and for each:
//   - a replica kind with kcp.io/status-policy: Summarize assigned to several locations: sets
//     .status to the summary of the locations' records (Summarize), with the generation every
//     location observed (ObservedGeneration);
//   - assigned to several locations: sets .status to the record of the location named by
//     kcp.io/status-location, when that location is assigned and has a record that differs;
//   - assigned to one location with a record: folds the record into .status (the view shows
//     the record until then);
//   - removes the records of locations the object is not assigned to.
//
// Every write carries the cached resourceVersion as precondition, so a newer source object is
// never overwritten; a conflict is left for the next round. Several replicas may run it: the
// writes are idempotent.
type Reconciler struct {
	cache    Cache
	writer   Writer
	interval time.Duration
}

// New returns a reconciler that reads c, writes through w and runs every interval.
func New(c Cache, w Writer, interval time.Duration) *Reconciler {
	return &Reconciler{cache: c, writer: w, interval: interval}
}

// Run reconciles every interval until ctx ends.
func (r *Reconciler) Run(ctx context.Context) {
	wait.UntilWithContext(ctx, r.reconcileAll, r.interval)
}

func (r *Reconciler) reconcileAll(ctx context.Context) {
	for _, info := range r.cache.Resources() {
		store, ok := r.cache.Store(info.GVR)
		if !ok {
			continue
		}
		for _, o := range store.StatusObjects() {
			if err := r.reconcile(ctx, info, o); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				klog.FromContext(ctx).Error(err, "reconciling status records", "resource", info.GVR, "object", o.Key())
			}
		}
	}
}

// reconcile brings one object's .status and records in step (see Reconciler).
func (r *Reconciler) reconcile(ctx context.Context, info source.ResourceInfo, o *cache.Object) error {
	u := o.Unstructured()
	locations := o.Locations()
	client, err := r.writer.ClusterResource(info.GVR, o.Cluster(), u.GetNamespace())
	if err != nil {
		return err
	}

	var want map[string]interface{}
	var fold string
	switch {
	case len(locations) > 1 && u.GetAnnotations()[contract.StatusPolicyAnnotation] == contract.StatusPolicySummarize && Summarizes(info.GVK().GroupKind()):
		records := map[string]map[string]interface{}{}
		for _, loc := range locations {
			if rec, ok, err := cache.StatusRecord(u, loc); ok && err == nil {
				records[loc] = rec
			}
		}
		want = Summarize(locations, records)
		if g, ok := ObservedGeneration(locations, records, o.ViewGeneration, u.GetGeneration()); ok {
			want["observedGeneration"] = g
		}
	case len(locations) == 1:
		if rec, ok, err := cache.StatusRecord(u, locations[0]); ok && err == nil {
			want, fold = rec, locations[0]
		}
	case len(locations) > 1:
		if m := u.GetAnnotations()[contract.StatusLocationAnnotation]; slices.Contains(locations, m) {
			if rec, ok, err := cache.StatusRecord(u, m); ok && err == nil {
				want = rec
			}
		}
	}
	current := u
	if want != nil && !reflect.DeepEqual(u.Object["status"], want) {
		target := o.SourceObject() // without the kcp.io/cluster the cache adds on a plain source
		target.Object["status"] = want
		var err error
		if info.HasStatus {
			current, err = client.UpdateStatus(ctx, target, metav1.UpdateOptions{FieldManager: fieldManager})
		} else {
			current, err = client.Update(ctx, target, metav1.UpdateOptions{FieldManager: fieldManager})
		}
		if err != nil {
			return err
		}
	}

	remove := map[string]interface{}{}
	for _, loc := range cache.StatusRecordLocations(current) {
		if loc == fold || !slices.Contains(locations, loc) {
			remove[contract.StatusRecordAnnotationPrefix+loc] = nil
		}
	}
	if len(remove) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{"resourceVersion": current.GetResourceVersion(), "annotations": remove},
	})
	if err != nil {
		return err
	}
	_, err = client.Patch(ctx, current.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	return err
}
