package cache

import (
	"sync"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics of the cache, registered once in the component-base legacy registry so that they
// show on the server's /metrics. The label "resource" is the GroupResource string
// ("configmaps", "deployments.apps").
var (
	malformedAssignments = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_apiserver_malformed_assignments_total",
		Help:           "Source object versions whose kcp.io/assigned-locations annotation did not parse; such objects are assigned to no location.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})

	unboundAssignments = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "mapper_apiserver_unbound_assignments_total",
		Help: "Source object versions (and re-evaluations after a change of the LocationBindings) whose kcp.io/assigned-locations names locations " +
			"not bound to the object's namespace (the Bound location-access mode); those locations are ignored: their views do not show the object.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})

	specDiffFailures = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "mapper_apiserver_spec_diff_failures_total",
		Help: "(object version, location) pairs whose spec-diff.kcp.io/<location> patch could not be applied; " +
			"the location's view keeps the last version that rendered, or withholds an object that never rendered.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})

	customizationFailures = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "mapper_apiserver_customization_failures_total",
		Help: "(object version, location) pairs on which a Customization's mutation failed (CEL error, cost limit, a result the schema rejects); " +
			"the location's view keeps the last version that rendered, or withholds an object that never rendered.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})

	invalidClusters = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_apiserver_invalid_cluster_total",
		Help:           "Object versions of a kcp source without a valid kcp.io/cluster annotation; such objects are not served.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})

	undecodableObjects = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "mapper_apiserver_undecodable_objects_total",
		Help: "Source object versions whose content does not decode as kube-apiserver's decoder reads it (a number outside the range of a float64, " +
			"a metadata field of the wrong type, malformed JSON); such a version is skipped: the cache keeps serving the version it had, or none.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})

	slowWatchersClosed = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_apiserver_slow_watchers_closed_total",
		Help:           "Location-view watches closed because their event buffer was full (the client did not read fast enough).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})

	eventsDispatched = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_apiserver_events_dispatched_total",
		Help:           "Watch events queued for location-view watchers, by event type.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource", "type"})

	currentWatchers = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "mapper_apiserver_watchers",
		Help:           "Location-view watches currently open.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})

	pendingDeletions = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "mapper_apiserver_location_pending_deletions",
		Help:           "Objects a location's view shows deleting (the location's finalizer holds them: its copy is still to be deleted, docs/views.md \"Deletion\"), by location.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location"})

	cachedObjects = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "mapper_apiserver_objects",
		Help:           "Source objects held in the cache.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})

	historyRestarts = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_apiserver_history_restarts_total",
		Help:           "Relists of the source that restarted a resource's event history (its watches were ended; resumes from before the list answer 410).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})

	sourceListErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_apiserver_source_list_errors_total",
		Help:           "Failed lists of a resource from the source, by reason (the Status reason, e.g. Forbidden, or Unreachable).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource", "reason"})

	// objectEncodings counts the encoder runs of Object.CacheEncode: one per object version,
	// location and wire format (a watch frame per event type, a GET's JSON), however many
	// watchers and readers share it (encode once).
	objectEncodings = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "mapper_apiserver_object_encodings_total",
		Help:           "Encodings of a cached object version (per location view and wire format: watch frames, GET responses); readers and watchers of the same view share one.",
		StabilityLevel: metrics.ALPHA,
	})

	renderQueued = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "mapper_apiserver_renderings_queued",
		Help:           "Objects whose renderings by Customizations wait for a Renderer worker (not counting those in progress).",
		StabilityLevel: metrics.ALPHA,
	})

	renderDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Name:           "mapper_apiserver_rendering_duration_seconds",
		Help:           "Time a Renderer worker took to render the pending locations of one object version and apply them.",
		Buckets:        []float64{0.001, 0.005, 0.025, 0.1, 0.5, 2.5, 10, 30},
		StabilityLevel: metrics.ALPHA,
	})

	renderRetries = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "mapper_apiserver_rendering_retries_total",
		Help:           "Renderings made again later because no resourceVersion above the one their view showed could be read from the source (a re-rendering never shows one resourceVersion with two contents).",
		StabilityLevel: metrics.ALPHA,
	})

	renderCost = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "mapper_apiserver_rendering_cel_cost_total",
		Help:           "CEL cost units (k8s.io/apiserver's cost model) spent by the Renderer's workers.",
		StabilityLevel: metrics.ALPHA,
	})

	historyBytes = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "mapper_apiserver_watch_history_bytes",
		Help:           "Estimated memory the event histories of all resources keep alive (superseded object versions), against --watch-history-memory.",
		StabilityLevel: metrics.ALPHA,
	})

	historyEvictions = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_apiserver_watch_history_evictions_total",
		Help:           "Events dropped from the history for watch resumption, by why: count (--watch-history-size), age (--watch-history-age), memory (--watch-history-memory), large (a version larger than --watch-history-max-object-size was superseded).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource", "reason"})

	registerMetricsOnce sync.Once
)

// registerMetrics registers the package's metrics in the legacy registry (once per process).
func registerMetrics() {
	registerMetricsOnce.Do(func() {
		legacyregistry.MustRegister(malformedAssignments, unboundAssignments, specDiffFailures, customizationFailures, invalidClusters, undecodableObjects, slowWatchersClosed, eventsDispatched, currentWatchers, pendingDeletions, cachedObjects, historyRestarts, sourceListErrors, objectEncodings,
			renderQueued, renderDuration, renderRetries, renderCost, historyBytes, historyEvictions)
	})
}

// storeMetrics holds the metric children of one resource, resolved once so that the hot path
// does not look labels up.
type storeMetrics struct {
	resource  string
	malformed metrics.CounterMetric
	// unbound counts object versions assigned to locations not bound to their namespace.
	unbound metrics.CounterMetric
	// specDiffFailures counts (object version, location) pairs whose patch did not apply.
	specDiffFailures metrics.CounterMetric
	// customizationFailures counts (object version, location) pairs a Customization failed on.
	customizationFailures metrics.CounterMetric
	// invalidCluster counts object versions of a kcp source without a valid cluster.
	invalidCluster metrics.CounterMetric
	// undecodable counts object versions whose content does not decode.
	undecodable metrics.CounterMetric
	slowClosed  metrics.CounterMetric
	added       metrics.CounterMetric
	modified    metrics.CounterMetric
	deleted     metrics.CounterMetric
	bookmarks   metrics.CounterMetric
	watchers    metrics.GaugeMetric
	objects     metrics.GaugeMetric
	// historyRestarts counts relists that restarted the history (Replace).
	historyRestarts metrics.CounterMetric
}

func newStoreMetrics(resource string) *storeMetrics {
	registerMetrics()
	return &storeMetrics{
		resource:              resource,
		malformed:             malformedAssignments.WithLabelValues(resource),
		unbound:               unboundAssignments.WithLabelValues(resource),
		specDiffFailures:      specDiffFailures.WithLabelValues(resource),
		customizationFailures: customizationFailures.WithLabelValues(resource),
		invalidCluster:        invalidClusters.WithLabelValues(resource),
		undecodable:           undecodableObjects.WithLabelValues(resource),
		slowClosed:            slowWatchersClosed.WithLabelValues(resource),
		added:                 eventsDispatched.WithLabelValues(resource, string(watch.Added)),
		modified:              eventsDispatched.WithLabelValues(resource, string(watch.Modified)),
		deleted:               eventsDispatched.WithLabelValues(resource, string(watch.Deleted)),
		bookmarks:             eventsDispatched.WithLabelValues(resource, string(watch.Bookmark)),
		watchers:              currentWatchers.WithLabelValues(resource),
		objects:               cachedObjects.WithLabelValues(resource),
		historyRestarts:       historyRestarts.WithLabelValues(resource),
	}
}

// dispatchCounts accumulates the events queued while dispatching one source event, so that the
// counters are touched once per source event rather than once per watcher.
type dispatchCounts struct{ added, modified, deleted int }

func (c *dispatchCounts) count(t watch.EventType) {
	switch t {
	case watch.Added:
		c.added++
	case watch.Modified:
		c.modified++
	case watch.Deleted:
		c.deleted++
	}
}

// listErrors returns the counter of failed source lists of the resource for reason.
func (m *storeMetrics) listErrors(reason string) metrics.CounterMetric {
	return sourceListErrors.WithLabelValues(m.resource, reason)
}

func (m *storeMetrics) recordDispatch(c dispatchCounts) {
	if c.added > 0 {
		m.added.Add(float64(c.added))
	}
	if c.modified > 0 {
		m.modified.Add(float64(c.modified))
	}
	if c.deleted > 0 {
		m.deleted.Add(float64(c.deleted))
	}
}

// newEvictionCounters returns the history eviction counters of resource.
func newEvictionCounters(resource string) evictionCounters {
	registerMetrics()
	return evictionCounters{
		count:  historyEvictions.WithLabelValues(resource, "count"),
		age:    historyEvictions.WithLabelValues(resource, "age"),
		memory: historyEvictions.WithLabelValues(resource, "memory"),
		large:  historyEvictions.WithLabelValues(resource, "large"),
	}
}
