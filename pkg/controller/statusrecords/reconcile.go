package statusrecords

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// reconcileItem reconciles one queued object: when its metadata still says it needs work, it is
// read from the source and brought in step (reconcile). A conflict or a deletion meanwhile is
// no error: the newer version arrives as an informer event and is queued again.
func (c *Controller) reconcileItem(ctx context.Context, item string) error {
	gvr, key, err := parseItem(item)
	if err != nil {
		return nil // not queued by Enqueue; nothing to retry
	}
	if m, ok := c.cfg.Objects.Get(gvr, key); !ok || !NeedsWork(m.Annotations) {
		return nil
	}
	cluster, namespace, name, ok := key.Split()
	if !ok {
		return nil
	}
	dyn, err := c.cfg.Writers(cluster)
	if err != nil {
		return err
	}
	client := dyn.Resource(gvr).Namespace(namespace)
	u, err := client.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	err = c.reconcile(ctx, gvr, cluster, client, u)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		klog.FromContext(ctx).V(4).Info("A newer version of the object arrived while its status records were written; it is queued again", "resource", gvr.GroupResource().String(), "object", string(key))
		return nil
	}
	return err
}

// reconcile brings the .status, status records and outcome records of u, the source's current version of an
// object of gvr in logical cluster cluster, in step (see the package documentation), writing
// through client.
func (c *Controller) reconcile(ctx context.Context, gvr schema.GroupVersionResource, cluster string, client dynamic.ResourceInterface, u *unstructured.Unstructured) error {
	ann := u.GetAnnotations()
	locations, err := contract.ParseLocations(ann[contract.AssignedLocationsAnnotation])
	if err != nil {
		locations = nil // an assignment that does not parse assigns nothing (docs/design.md, "Names")
	}
	if c.cfg.Bound != nil {
		locations = c.cfg.Bound(cluster, u.GetNamespace(), locations)
	}
	var want map[string]interface{}
	var fold string
	switch {
	case len(locations) > 1 && ann[contract.StatusPolicyAnnotation] == contract.StatusPolicySummarize && Summarizes(u.GroupVersionKind().GroupKind()):
		records := map[string]map[string]interface{}{}
		for _, loc := range locations {
			if rec, ok, err := contract.StatusRecord(ann, loc); ok && err == nil {
				records[loc] = rec
			}
		}
		want = Summarize(locations, records)
		viewGeneration := func(location string) (int64, error) {
			return c.viewGeneration(ctx, gvr, cluster, location, u)
		}
		g, ok, err := ObservedGeneration(locations, records, viewGeneration, u.GetGeneration())
		if err != nil {
			return fmt.Errorf("reading the generation a location's view shows: %w", err)
		}
		if ok {
			want["observedGeneration"] = g
		}
	case len(locations) == 1:
		if rec, ok, err := contract.StatusRecord(ann, locations[0]); ok && err == nil {
			want, fold = rec, locations[0]
		}
	case len(locations) > 1:
		if m := ann[contract.StatusLocationAnnotation]; slices.Contains(locations, m) {
			if rec, ok, err := contract.StatusRecord(ann, m); ok && err == nil {
				want = rec
			}
		}
	}

	current := u
	if want != nil && !reflect.DeepEqual(u.Object["status"], want) {
		target := u.DeepCopy()
		target.Object["status"] = want
		// Without managedFields kube-apiserver keeps the live ones and adds this write's
		// ownership; with them, it would take them as the request's own.
		target.SetManagedFields(nil)
		hasStatus, err := c.cfg.HasStatus(gvr)
		if err != nil {
			return err
		}
		if hasStatus {
			current, err = client.UpdateStatus(ctx, target, metav1.UpdateOptions{FieldManager: fieldManager})
		} else {
			current, err = client.Update(ctx, target, metav1.UpdateOptions{FieldManager: fieldManager})
		}
		if err != nil {
			return err
		}
	}

	remove := map[string]interface{}{}
	for _, loc := range contract.StatusRecordLocations(current.GetAnnotations()) {
		if loc == fold || !slices.Contains(locations, loc) {
			remove[contract.StatusRecordAnnotation(loc)] = nil
		}
	}
	for _, loc := range contract.OutcomeRecordLocations(current.GetAnnotations()) {
		// A location that holds its finalizer still shows the object in its view: its mapper
		// removes the record when it releases the object (or applies it again).
		if !slices.Contains(locations, loc) && !slices.Contains(current.GetFinalizers(), contract.LocationFinalizer(loc)) {
			remove[contract.OutcomeAnnotation(loc)] = nil
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

// viewGeneration returns the metadata.generation location's view shows of u, read through the
// view's path of cluster with resourceVersion u's: mapper-apiserver answers once its cache
// holds u's version or a newer one (docs/views.md, "Reads and resourceVersion"), so the
// generation is never older than u's view's.
func (c *Controller) viewGeneration(ctx context.Context, gvr schema.GroupVersionResource, cluster, location string, u *unstructured.Unstructured) (int64, error) {
	view, err := c.cfg.Views(location, cluster)
	if err != nil {
		return 0, err
	}
	v, err := view.Resource(gvr).Namespace(u.GetNamespace()).Get(ctx, u.GetName(), metav1.GetOptions{ResourceVersion: u.GetResourceVersion()})
	if err != nil {
		return 0, err
	}
	return v.GetGeneration(), nil
}
