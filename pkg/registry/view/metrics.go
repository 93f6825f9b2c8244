package view

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	unprovenConsistentReads = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "mapper_apiserver",
		Subsystem:      "view",
		Name:           "unproven_consistent_reads_total",
		Help:           "Reads with resourceVersion \"\" served before the cache could prove it reached the source's current resourceVersion (see docs/views.md), by resource.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})

	registerOnce sync.Once
)

// RegisterMetrics registers the view's metrics with the legacy registry (served at /metrics).
// It is safe to call more than once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(unprovenConsistentReads)
	})
}
