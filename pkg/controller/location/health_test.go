package location

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

func TestHealth(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	grace := 40 * time.Second
	lease := func(ago time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now.Add(-ago)}}}
	}
	if h := Health(nil, now, grace); h.Fresh || h.Unknown.Reason != controlv1alpha1.ReasonNoLease || h.Unknown.Status != metav1.ConditionUnknown {
		t.Errorf("no lease: %+v", h)
	}
	if h := Health(&coordinationv1.Lease{}, now, grace); h.Fresh || h.Unknown.Reason != controlv1alpha1.ReasonNoLease {
		t.Errorf("never renewed: %+v", h)
	}
	if h := Health(lease(10*time.Second), now, grace); !h.Fresh || h.RecheckAfter != 30*time.Second {
		t.Errorf("renewed 10s ago: %+v", h)
	}
	if h := Health(lease(grace), now, grace); !h.Fresh || h.RecheckAfter != 0 {
		t.Errorf("renewed exactly the grace period ago: %+v", h)
	}
	if h := Health(lease(41*time.Second), now, grace); h.Fresh || h.Unknown.Reason != controlv1alpha1.ReasonLeaseExpired {
		t.Errorf("renewed 41s ago: %+v", h)
	}
	if h := Health(lease(-time.Hour), now, grace); !h.Fresh || h.RecheckAfter != grace {
		t.Errorf("renewed in the future: %+v", h)
	}
}
