package placement

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// Location is what placement reads of one SyncTarget.
type Location struct {
	// Name is the location name (the SyncTarget's metadata.name).
	Name string
	// Labels are the SyncTarget's labels.
	Labels map[string]string
	// Unschedulable is spec.unschedulable: no new work.
	Unschedulable bool
	// Ready is whether the Ready condition is True.
	Ready bool
	// Since is when the Ready condition last changed (its lastTransitionTime), or the
	// SyncTarget's creation when it has no Ready condition yet.
	Since time.Time
	// SyncTarget is the object, for capacity weights.
	SyncTarget *controlv1alpha1.SyncTarget
	// Resources are the resources of the location's view ("configmaps", "deployments.apps")
	// as its mapper reported them (status.resources); nil before it reported any.
	Resources sets.Set[string]
	// Unserved are the resources of the view that the location's target does not serve, or
	// serves with a schema that may refuse what the source's allows, as its mapper reported
	// them (status.resources entries Halted, or with the reason SchemaIncompatible), each with
	// the entry's reason; nil when there are none. SchemaCompatibilityUnknown does not count.
	Unserved map[string]string
}

// LocationOf reads st.
func LocationOf(st *controlv1alpha1.SyncTarget) Location {
	l := Location{Name: st.Name, Labels: st.Labels, Unschedulable: st.Spec.Unschedulable, Since: st.CreationTimestamp.Time, SyncTarget: st}
	if len(st.Status.Resources) > 0 {
		l.Resources = sets.New[string]()
		for _, r := range st.Status.Resources {
			l.Resources.Insert(r.Resource)
			if r.State != controlv1alpha1.ResourceSynced || r.Reason == controlv1alpha1.ReasonSchemaIncompatible {
				if l.Unserved == nil {
					l.Unserved = map[string]string{}
				}
				l.Unserved[r.Resource] = r.Reason
			}
		}
	}
	if c := meta.FindStatusCondition(st.Status.Conditions, controlv1alpha1.SyncTargetReady); c != nil {
		l.Ready = c.Status == metav1.ConditionTrue
		l.Since = c.LastTransitionTime.Time
	}
	return l
}

// Mirrors reports whether the location's view serves the resource gr ("secrets",
// "deployments.apps"): false only when its mapper has reported the view's resources and gr is
// not among them. The views of one mapper-apiserver all serve the resources it mirrors, so a
// resource missing from one location's report is missing everywhere.
func (l Location) Mirrors(gr string) bool {
	return l.Resources == nil || l.Resources.Has(gr)
}

// Serves reports whether the location's target serves the resource gr ("gadgets.example.com")
// compatibly; when not, reason is the reason its mapper reported (TargetLacksResource, a
// schema incompatibility). A resource the mapper has not reported on is served: only what it
// reported keeps new work away (docs/placement.md, "Compatible locations").
func (l Location) Serves(gr string) (reason string, ok bool) {
	reason, unserved := l.Unserved[gr]
	return reason, !unserved
}

// FailedAt returns when the location counts as failed for a tolerance: Since+tolerance when
// it is not Ready, the zero time when it is Ready. A location is failed at now when the result
// is not zero and not after now.
func (l Location) FailedAt(tolerance time.Duration) time.Time {
	if l.Ready {
		return time.Time{}
	}
	return l.Since.Add(tolerance)
}

// weight returns the location's weight under w (nil: 1). A label weight is the label's value
// as a non-negative integer (0 when absent or malformed); a capacity weight is the quantity's
// value in milli-units for cpu and in units otherwise (0 when absent).
func (l Location) weight(w *controlv1alpha1.PlacementWeights) int64 {
	if w == nil {
		return 1
	}
	var v int64
	switch {
	case w.Label != "":
		n, err := strconv.ParseInt(l.Labels[w.Label], 10, 64)
		if err == nil && n > 0 {
			v = n
		}
	case w.Capacity != "" && l.SyncTarget != nil:
		if q, ok := l.SyncTarget.Status.Capacity[corev1.ResourceName(w.Capacity)]; ok {
			if w.Capacity == "cpu" {
				v = q.MilliValue()
			} else {
				v = q.Value()
			}
		}
	}
	return v
}
