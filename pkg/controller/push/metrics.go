package push

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics of push mode, in the component-base legacy registry (mapper-controller's
// /metrics). The label "location" is bounded by the number of push-mode SyncTargets.
var (
	mappersRunning = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "mapper_controller_push_mappers",
		Help:           "In-process mappers running (one per push-mode SyncTarget with a usable kubeconfig).",
		StabilityLevel: metrics.ALPHA,
	})
	mapperStarts = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_controller_push_mapper_starts_total",
		Help:           "In-process mapper starts, by location and reason: Started (none ran), KubeconfigChanged (a restart with the Secret's new kubeconfig), Exited (a restart after the mapper failed).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "reason"})
	mapperStops = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_controller_push_mapper_stops_total",
		Help:           "In-process mapper stops, by location and reason: SyncTargetDeleted, PullMode (kubeconfigSecretRef removed), a Ready reason (KubeconfigSecretMissing, KubeconfigInvalid, KubeconfigSecretNotAllowed), KubeconfigChanged, or Shutdown.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "reason"})

	registerOnce sync.Once
)

// registerMetrics registers the metrics; it is idempotent.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(mappersRunning, mapperStarts, mapperStops)
	})
}
