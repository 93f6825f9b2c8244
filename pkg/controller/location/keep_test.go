package location

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// TestKeepsNotReady: the lifecycle controller keeps push mode's Ready=False reasons (no
// mapper runs on purpose) instead of overwriting them with Unknown, and only those.
func TestKeepsNotReady(t *testing.T) {
	push := &controlv1alpha1.SyncTarget{Spec: controlv1alpha1.SyncTargetSpec{KubeconfigSecretRef: &controlv1alpha1.SecretReference{Namespace: "n", Name: "s"}}}
	pull := &controlv1alpha1.SyncTarget{}
	cond := func(status metav1.ConditionStatus, reason string) *metav1.Condition {
		return &metav1.Condition{Type: controlv1alpha1.SyncTargetReady, Status: status, Reason: reason}
	}
	for _, c := range []struct {
		st   *controlv1alpha1.SyncTarget
		cur  *metav1.Condition
		want bool
	}{
		{push, cond(metav1.ConditionFalse, controlv1alpha1.ReasonKubeconfigSecretMissing), true},
		{push, cond(metav1.ConditionFalse, controlv1alpha1.ReasonKubeconfigInvalid), true},
		{push, cond(metav1.ConditionFalse, controlv1alpha1.ReasonKubeconfigSecretNotAllowed), true},
		{push, cond(metav1.ConditionFalse, controlv1alpha1.ReasonTargetUnreachable), false},
		{push, cond(metav1.ConditionTrue, controlv1alpha1.ReasonMapperReady), false},
		{push, nil, false},
		{pull, cond(metav1.ConditionFalse, controlv1alpha1.ReasonKubeconfigInvalid), false},
	} {
		if got := keepsNotReady(c.st, c.cur); got != c.want {
			t.Errorf("keepsNotReady(push=%v, %+v) = %v, want %v", c.st.Spec.KubeconfigSecretRef != nil, c.cur, got, c.want)
		}
	}
}
