package mapper

import "k8s.io/component-base/metrics"

// relatedWrites counts the writes of related copies through the view (docs/resourcemapping.md,
// "Related objects: origin Target"), by resource (of the copies), operation (create, update,
// delete) and result (success, error).
var relatedWrites = metrics.NewCounterVec(&metrics.CounterOpts{
	Name:           "mapper_related_copy_writes_total",
	Help:           "Writes of related copies (objects a target holds for a main object's copy, brought up into the source) through the view, by operation (create, update, delete) and result (success, error).",
	StabilityLevel: metrics.ALPHA,
}, []string{"location", "shard", "resource", "operation", "result"})

func (l locationMetrics) relatedWrites(resource, operation, result string) metrics.CounterMetric {
	return relatedWrites.WithLabelValues(l.location, l.shard, resource, operation, result)
}
