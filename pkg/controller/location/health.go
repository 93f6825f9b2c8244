package location

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// LeaseHealth is what a location's Lease says at a moment.
type LeaseHealth struct {
	// Fresh is true when the Lease was renewed within the grace period.
	Fresh bool
	// RecheckAfter is when a fresh Lease expires unless renewed again (zero when not fresh).
	RecheckAfter time.Duration
	// Unknown is the Ready condition to set when the Lease is not fresh.
	Unknown metav1.Condition
}

// Health judges lease (nil when there is none) at now with grace as the grace period: fresh
// when spec.renewTime is no more than grace ago (as the node lifecycle controller judges a
// node Lease against --node-monitor-grace-period). A renewTime in the future (clock skew)
// counts as now.
func Health(lease *coordinationv1.Lease, now time.Time, grace time.Duration) LeaseHealth {
	if lease == nil || lease.Spec.RenewTime == nil {
		return LeaseHealth{Unknown: metav1.Condition{
			Type: controlv1alpha1.SyncTargetReady, Status: metav1.ConditionUnknown, Reason: controlv1alpha1.ReasonNoLease,
			Message: "No mapper has renewed the location's Lease; is a mapper running for it?",
		}}
	}
	renewed := lease.Spec.RenewTime.Time
	if renewed.After(now) {
		renewed = now
	}
	age := now.Sub(renewed)
	if age <= grace {
		return LeaseHealth{Fresh: true, RecheckAfter: grace - age}
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	return LeaseHealth{Unknown: metav1.Condition{
		Type: controlv1alpha1.SyncTargetReady, Status: metav1.ConditionUnknown, Reason: controlv1alpha1.ReasonLeaseExpired,
		Message: fmt.Sprintf("The mapper %q last renewed the location's Lease %s ago, more than the grace period of %s; the view keeps serving, nothing is deleted.",
			holder, age.Round(time.Second), grace),
	}}
}
