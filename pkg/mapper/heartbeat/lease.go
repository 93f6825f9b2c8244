package heartbeat

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// runLease renews the Lease namespace/name every renew interval until ctx ends, holding it
// as identity with a duration of leaseDuration (whole seconds). It uses the lease
// controller kubelets use for node Leases: it gets the Lease, creates it only when it is
// missing (a pre-created Lease needs no create permission), then updates it. Failures are
// logged and retried; mapping never depends on them.
func runLease(ctx context.Context, client kubernetes.Interface, namespace, name, identity string, renew, leaseDuration time.Duration) {
	c := lease.NewController(clock.RealClock{}, client, identity, int32(leaseDuration/time.Second), nil, renew, name, namespace,
		func(l *coordinationv1.Lease) error {
			// A pre-created Lease, or one a previous leader held, names another holder: take it.
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != identity {
				l.Spec.HolderIdentity = ptr.To(identity)
				l.Spec.AcquireTime = &metav1.MicroTime{Time: time.Now()}
				l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
			}
			return nil
		})
	c.Run(ctx)
}
