package dependencies

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics of the dependency controller, in the component-base legacy registry
// (mapper-controller's /metrics).
var (
	objectWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_controller_dependency_object_writes_total",
		Help:           "Patches of the assignment of dependencies, by kind (Assign: locations only added, Unassign: a location removed) and result (Written, Conflict, Error). Unchanged inputs write nothing.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind", "result"})
	statusWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_controller_dependency_status_writes_total",
		Help:           "Patches of Placements' dependency counts, by result (Written, Conflict, Error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	informersSynced = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "mapper_controller_dependency_informers_synced",
		Help:           "1 once every informer of the built-in kinds the dependency controller reads (workloads, what they reference, Placements, SyncTargets) has synced, 0 before: until then it writes nothing.",
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once
)

// registerMetrics registers the metrics; it is idempotent.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(objectWrites, statusWrites, informersSynced)
	})
}
