package mapper

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// targetChanged enqueues the status write-back of a managed target object whose status
// changed (or that the informer saw for the first time).
func (m *Mapper) targetChanged(r *resource, old, obj interface{}) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	if o, ok := old.(*unstructured.Unstructured); ok && equality.Semantic.DeepEqual(o.Object["status"], u.Object["status"]) {
		return
	}
	ref, _, ok := MarkedSource(u, m.cfg.Location, r.namespaced)
	if !ok {
		return
	}
	m.statusQueue.Add(keyOf(r.gvr, ref))
}

// reflectStatus writes the status of the target copy of key back to its source through the
// view's /status subresource (invariant 3), when the source opted in (Reflects) and the view
// shows a different status. A write that meets a newer source object (409 Conflict) is
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
	ns := ""
	if r.namespaced {
		ns = m.namespaceMapping().TargetNamespace(key.Cluster, key.Namespace)
	}
	live := r.targetObject(ns, key.Name)
	if live == nil {
		return nil
	}
	if ref, _, ok := MarkedSource(live, m.cfg.Location, r.namespaced); !ok || ref != key.source() {
		return nil
	}
	status, _ := live.Object["status"].(map[string]interface{})
	if len(status) == 0 || equality.Semantic.DeepEqual(obj.Object["status"], live.Object["status"]) {
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
		if !Reflects(cur) || equality.Semantic.DeepEqual(cur.Object["status"], live.Object["status"]) {
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
