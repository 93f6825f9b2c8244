package mapper

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// targetChanged enqueues the status write-back of a managed target object whose status
// changed, or whose contract.SourceGenerationAnnotation changed (the status it reports
// depends on it: ReportedStatus), or that the informer saw for the first time.
func (m *Mapper) targetChanged(r *resource, old, obj interface{}) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	if o, ok := old.(*unstructured.Unstructured); ok && equality.Semantic.DeepEqual(o.Object["status"], u.Object["status"]) &&
		o.GetAnnotations()[contract.SourceGenerationAnnotation] == u.GetAnnotations()[contract.SourceGenerationAnnotation] {
		return
	}
	ref, _, ok := MarkedSource(u, m.cfg.Location, r.namespaced)
	if !ok || !m.owns(ref) {
		return // not a copy, or another shard's: its status is that shard's to write
	}
	m.statusQueue.Add(keyOf(r.gvr, ref))
}

// reflectStatus writes the status of the target copy of key back to its source through the
// view's /status subresource (invariant 3), when the source opted in (Reflects) and the view
// shows a different status than the copy reports (ReportedStatus). A write that meets a newer source object (409 Conflict) is
// retried with a fresh read through the view. It is the status queue's work function.
func (m *Mapper) reflectStatus(ctx context.Context, key itemKey) error {
	r := m.resource(key.GVR)
	if r == nil || r.halted.Load() {
		return nil
	}
	obj := r.viewObject(key, m.cfg.ClusterName)
	if obj == nil || !Mapped(obj) || !Reflects(obj) {
		return nil
	}
	place, err := m.placeFor(ctx, r, key)
	if err != nil {
		return nil // no place, no copy: the sync says why in the object's outcome record
	}
	live := r.targetObject(place.Namespace, place.Name)
	if live == nil {
		return nil
	}
	if ref, _, ok := MarkedSource(live, m.cfg.Location, r.namespaced); !ok || ref != key.source() {
		return nil
	}
	status := ReportedStatus(live, obj)
	if len(status) == 0 || equality.Semantic.DeepEqual(obj.Object["status"], status) {
		return nil
	}

	// Through the object's cluster path of the view: on the all-clusters path a name held by
	// several logical clusters is ambiguous (400).
	clusterView, err := m.clusterViews.For(key.Cluster)
	if err != nil {
		return err
	}
	client := clusterView.Resource(r.gvr).Namespace(key.Namespace)
	cur := obj
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if cur == nil {
			fresh, err := client.Get(ctx, key.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			cur = fresh
		}
		if !Reflects(cur) || equality.Semantic.DeepEqual(cur.Object["status"], status) {
			return nil
		}
		write := cur.DeepCopy()
		write.Object["status"] = runtime.DeepCopyJSONValue(status)
		_, err := client.UpdateStatus(ctx, write, metav1.UpdateOptions{FieldManager: m.cfg.FieldManager})
		if apierrors.IsConflict(err) {
			m.metrics.statusWrites(r.name(), "conflict").Inc()
			cur = nil
		}
		return err
	})
	if err != nil {
		m.metrics.statusWrites(r.name(), "error").Inc()
		m.metrics.errors(r.name(), "status").Inc()
		klog.FromContext(ctx).V(2).Info("Writing status back through the view failed; retrying with backoff", "resource", r.name(), "source", key.source().String(), "err", err.Error())
		return fmt.Errorf("writing the status of %s %s through the view: %w", r.name(), key.source().String(), err)
	}
	m.metrics.statusWrites(r.name(), "success").Inc()
	klog.FromContext(ctx).V(4).Info("Reflected status", "resource", r.name(), "source", key.source().String())
	return nil
}

// ReportedStatus returns the status the target copy live reports to its view object view: a
// copy of live's .status (nil when it has none) whose status.observedGeneration, when
// present, counts the view's generations instead of the target's. The mapper writes it back
// when the view's .status differs from it, and `mapper verify` compares the two (invariant 3):
//   - when live's controller observed live's own generation (status.observedGeneration ≥
//     metadata.generation), it observed the view generation live was applied from
//     (contract.SourceGenerationAnnotation), which is reported;
//   - otherwise it has not observed the latest apply yet: the observedGeneration the view
//     shows (the one reported before) is kept, or none when the view shows none.
//
// A view's generation moves only with a change it shows outside .status (docs/views.md), so
// a status write never moves what is reported here: the write-back does not feed itself.
// The Summarize policy turns the reported generations into the source's (docs/status.md).
func ReportedStatus(live, view *unstructured.Unstructured) map[string]interface{} {
	status, _ := runtime.DeepCopyJSONValue(live.Object["status"]).(map[string]interface{})
	observed, found, err := unstructured.NestedInt64(status, "observedGeneration")
	if !found || err != nil {
		return status
	}
	if stamp, err := strconv.ParseInt(live.GetAnnotations()[contract.SourceGenerationAnnotation], 10, 64); err == nil && stamp > 0 && observed >= live.GetGeneration() {
		status["observedGeneration"] = stamp
		return status
	}
	if before, found, err := unstructured.NestedInt64(view.Object, "status", "observedGeneration"); found && err == nil {
		status["observedGeneration"] = before
	} else {
		delete(status, "observedGeneration")
	}
	return status
}
