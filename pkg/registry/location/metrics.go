package location

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	unregisteredLocations = metrics.NewGauge(&metrics.GaugeOpts{
		Name: "mapper_apiserver_unregistered_locations",
		Help: "Location names with assigned objects or open watches but no SyncTarget (listed by `kubectl get locations --field-selector status.registered=false` only); " +
			"in the Bound location-access mode only locations bound to some namespace can have objects.",
		StabilityLevel: metrics.ALPHA,
	})

	registerMetricsOnce sync.Once
)

// registerMetrics registers the package's metrics in the legacy registry (once per process).
func registerMetrics() {
	registerMetricsOnce.Do(func() { legacyregistry.MustRegister(unregisteredLocations) })
}
