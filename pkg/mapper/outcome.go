package mapper

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// The mapper's apply outcome records (docs/mapper.md, "Outcome records"; docs/design.md,
// "Names"): while the location cannot apply a view object (the target refuses it, an object
// the mapper does not manage holds its place, its resource is halted or the location paused),
// the source object carries outcome.kcp.io/<location> saying why. The mapper writes it through
// its view, as its finalizer, with the view object's resourceVersion as precondition, and
// only when the record the view shows says something else (contract.OutcomeRecord.SameOutcome):
// an object that keeps failing for the same reason, or a healthy object, costs no write. It
// removes the record once the object applies, and with its finalizer when it releases the
// object; mapper-controller removes the records of locations an object left otherwise.
//
// A record write that fails (a stale view object: 409) is logged and counted, never fails the
// sync: the view's next event of the object brings it back.

// recordOutcome makes the source object of view object obj carry this location's outcome
// record of reason and message (about obj's generation), unless it carries one that says the
// same already.
func (m *Mapper) recordOutcome(ctx context.Context, r *resource, key itemKey, obj *unstructured.Unstructured, reason, message string) {
	want := contract.NewOutcomeRecord(reason, message, obj.GetGeneration(), time.Now())
	if have, ok := contract.OutcomeRecordOf(obj.GetAnnotations(), m.cfg.Location); ok && have.SameOutcome(want) {
		return
	}
	u := obj.DeepCopy()
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[contract.OutcomeAnnotation(m.cfg.Location)] = want.Encode()
	u.SetAnnotations(ann)
	m.writeOutcome(ctx, r, key, u, "set", reason)
}

// clearOutcome removes this location's outcome record from the source object of view object
// obj, when obj shows one.
func (m *Mapper) clearOutcome(ctx context.Context, r *resource, key itemKey, obj *unstructured.Unstructured) {
	if _, ok := obj.GetAnnotations()[contract.OutcomeAnnotation(m.cfg.Location)]; !ok {
		return
	}
	u := obj.DeepCopy()
	dropOwnOutcome(u, m.cfg.Location)
	m.writeOutcome(ctx, r, key, u, "remove", "")
}

// dropOwnOutcome removes location's outcome record from u's annotations.
func dropOwnOutcome(u *unstructured.Unstructured, location string) {
	ann := u.GetAnnotations()
	delete(ann, contract.OutcomeAnnotation(location))
	if len(ann) == 0 {
		ann = nil
	}
	u.SetAnnotations(ann)
}

// writeOutcome writes u, a view object with only this location's outcome record changed,
// through the view (op is "set" or "remove", for the metric and the log).
func (m *Mapper) writeOutcome(ctx context.Context, r *resource, key itemKey, u *unstructured.Unstructured, op, reason string) {
	logger := klog.FromContext(ctx)
	if err := m.updateThroughView(ctx, r, key, u); err != nil {
		m.metrics.outcomeWrites(r.name(), op, "error").Inc()
		logger.V(2).Info("Writing the location's outcome record through the view failed; the object's next sync writes it", "resource", r.name(), "source", key.source().String(), "operation", op, "err", err.Error())
		return
	}
	m.metrics.outcomeWrites(r.name(), op, "success").Inc()
	logger.V(2).Info("Wrote the location's outcome record", "resource", r.name(), "source", key.source().String(), "operation", op, "reason", reason)
}

// updateThroughView updates the source object of key with u, the view object with this
// location's marks changed (its finalizer, its outcome record), through the view path of its
// logical cluster, with u's resourceVersion as precondition: mapper-apiserver accepts exactly
// such changes (docs/views.md, "Writes").
func (m *Mapper) updateThroughView(ctx context.Context, r *resource, key itemKey, u *unstructured.Unstructured) error {
	view, err := m.clusterViews.For(key.Cluster)
	if err != nil {
		return err
	}
	_, err = view.Resource(r.gvr).Namespace(key.Namespace).Update(ctx, u, metav1.UpdateOptions{FieldManager: m.cfg.FieldManager})
	return err
}

// refusedByTarget reports whether err is the target refusing an object, for a reason that
// is the object's (an outcome record says it): 400 BadRequest, 403 Forbidden (an admission
// webhook's denial, a quota), 413 RequestEntityTooLarge, 422 Invalid. Other errors (the
// target unreachable, a timeout, 409, 429, 5xx) are transient or the mapper's own, and only
// retried.
func refusedByTarget(err error) bool {
	var s apierrors.APIStatus
	if !errors.As(err, &s) {
		return false
	}
	switch s.Status().Code {
	case http.StatusBadRequest, http.StatusForbidden, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// noteRefusal records the outcome Rejected for obj when err is the target refusing it
// (refusedByTarget); what says what was refused ("" for the object itself).
func (m *Mapper) noteRefusal(ctx context.Context, r *resource, key itemKey, obj *unstructured.Unstructured, what string, err error) {
	if !refusedByTarget(err) {
		return
	}
	msg := err.Error()
	if what != "" {
		msg = fmt.Sprintf("%s: %s", what, msg)
	}
	m.recordOutcome(ctx, r, key, obj, contract.OutcomeRejected, msg)
}
