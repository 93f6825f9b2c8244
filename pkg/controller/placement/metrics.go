package placement

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics of the placement controller, in the component-base legacy registry
// (mapper-controller's /metrics).
var (
	objectWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_controller_placement_object_writes_total",
		Help:           "Server-side applies of placement annotations on source objects, by kind (Assign, Unassign) and result (Written, Conflict, Error). Unchanged placements write nothing.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind", "result"})
	statusWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_controller_placement_status_writes_total",
		Help:           "Writes of Placement status and finalizers, by result (Written, Conflict, Error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	registerOnce sync.Once
)

// registerMetrics registers the metrics; it is idempotent.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(objectWrites, statusWrites)
	})
}
