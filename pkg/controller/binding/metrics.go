package binding

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	unboundReports = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "mapper_controller_unbound_assignments_reported_total",
		Help:           "Warning Events UnboundLocation recorded: objects whose kcp.io/assigned-locations names locations not bound to their namespace (once per object and set of such locations).",
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once
)

// registerMetrics registers the package's metrics in the legacy registry (once per process).
func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(unboundReports) })
}
