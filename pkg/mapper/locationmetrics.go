package mapper

import (
	"k8s.io/component-base/metrics"
)

// locationMetrics gives one Mapper's series of the mapper metrics (metrics.go): each method
// returns the series with the label "location" set to the mapper's location, followed by the
// other labels in the order of the metric's definition. A Mapper creates it once in New.
type locationMetrics struct {
	location string
	// shard names the mapper's part of the location (contract.ViewPart.String: "shards/1-of-4",
	// "clusters/a"; "" for the whole location): the label "shard", second on every series.
	shard string
}

func (l locationMetrics) viewObjects(resource string) metrics.GaugeMetric {
	return viewObjects.WithLabelValues(l.location, l.shard, resource)
}

func (l locationMetrics) objectsMapped(resource string) metrics.GaugeMetric {
	return objectsMapped.WithLabelValues(l.location, l.shard, resource)
}

func (l locationMetrics) applies(resource, result string) metrics.CounterMetric {
	return applies.WithLabelValues(l.location, l.shard, resource, result)
}

func (l locationMetrics) deletes(resource, reason string) metrics.CounterMetric {
	return deletes.WithLabelValues(l.location, l.shard, resource, reason)
}

func (l locationMetrics) finalizerWrites(resource, operation, result string) metrics.CounterMetric {
	return finalizerWrites.WithLabelValues(l.location, l.shard, resource, operation, result)
}

func (l locationMetrics) outcomeWrites(resource, operation, result string) metrics.CounterMetric {
	return outcomeWrites.WithLabelValues(l.location, l.shard, resource, operation, result)
}

func (l locationMetrics) paused(resource string) metrics.GaugeMetric {
	return paused.WithLabelValues(l.location, l.shard, resource)
}

func (l locationMetrics) conflictsTotal(resource string) metrics.CounterMetric {
	return conflictsTotal.WithLabelValues(l.location, l.shard, resource)
}

func (l locationMetrics) conflictsCurrent(resource string) metrics.GaugeMetric {
	return conflictsCurrent.WithLabelValues(l.location, l.shard, resource)
}

func (l locationMetrics) identityRefusals(resource string) metrics.CounterMetric {
	return identityRefusals.WithLabelValues(l.location, l.shard, resource)
}

func (l locationMetrics) errors(resource, operation string) metrics.CounterMetric {
	return errorsTotal.WithLabelValues(l.location, l.shard, resource, operation)
}

func (l locationMetrics) resourceHalted(resource string) metrics.GaugeMetric {
	return resourceHalted.WithLabelValues(l.location, l.shard, resource)
}

func (l locationMetrics) syncLag(resource string) metrics.ObserverMetric {
	return syncLag.WithLabelValues(l.location, l.shard, resource)
}

func (l locationMetrics) statusWrites(resource, result string) metrics.CounterMetric {
	return statusWrites.WithLabelValues(l.location, l.shard, resource, result)
}

func (l locationMetrics) sweeps(result string) metrics.CounterMetric {
	return sweeps.WithLabelValues(l.location, l.shard, result)
}

func (l locationMetrics) initialSyncComplete() metrics.GaugeMetric {
	return initialSyncComplete.WithLabelValues(l.location, l.shard)
}

func (l locationMetrics) viewClusters() metrics.GaugeMetric {
	return viewClusters.WithLabelValues(l.location, l.shard)
}

func (l locationMetrics) namespaceMapping(mapping NamespaceMapping) metrics.GaugeMetric {
	return namespaceMappingInUse.WithLabelValues(l.location, l.shard, string(mapping))
}

// deleteResource removes the location's series of the per-resource gauges of a resource the
// mapper stopped mapping (the view no longer serves it): mapper_view_objects and
// mapper_resource_halted. mapper_objects_mapped and mapper_conflicts follow the mapper's
// object states, which outlive the resource's informers.
func (l locationMetrics) deleteResource(resource string) {
	viewObjects.DeleteLabelValues(l.location, l.shard, resource)
	resourceHalted.DeleteLabelValues(l.location, l.shard, resource)
}

// gauges lists every gauge of the mapper metrics; deleteGauges removes the location's series
// of each.
var gauges = []*metrics.GaugeVec{viewObjects, objectsMapped, conflictsCurrent, resourceHalted,
	initialSyncComplete, viewClusters, namespaceMappingInUse, paused}

// deleteGauges removes every gauge series of the location, when its mapper stops (Run
// returns): a stopped push mapper leaves no stale gauges, and a mapper started again for the
// location counts its gauges from zero, as its fresh state does. Counters and the histogram
// stay (a Prometheus counter may only grow).
func (l locationMetrics) deleteGauges() {
	for _, g := range gauges {
		// component-base's GaugeVec embeds the Prometheus one (nil until registered), whose
		// DeletePartialMatch removes every series with these labels whatever the others are.
		if g.IsCreated() {
			g.DeletePartialMatch(map[string]string{"location": l.location, "shard": l.shard})
		}
	}
}
