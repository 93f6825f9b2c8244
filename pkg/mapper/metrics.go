package mapper

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	// client-go's own metrics on the same registry: workqueue_* (depth, adds, latency,
	// retries of the "mapper_sync" and "mapper_status" queues), rest_client_* and
	// leader_election_master_status.
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
)

// Metrics of the mapper, registered in the component-base legacy registry (served on
// /metrics). Every series has the label "location" first (the mapper's Config.Location, so the
// push mappers of one mapper-controller process stay apart) and "shard" second (the mapper's
// part of the location, Config.Part.String(): "shards/1-of-4", "" for the whole location, so
// the shards of one location stay apart); code sets them only through a
// Mapper's locationMetrics. The label "resource" is the GroupResource string ("configmaps",
// "deployments.apps"). docs/mapper.md explains each one.
var (
	viewObjects = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "mapper_view_objects",
		Help:           "Objects the location view holds, per resource (the informer's store).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "shard", "resource"})

	objectsMapped = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "mapper_objects_mapped",
		Help:           "View objects whose target copy was applied successfully at their latest version.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "shard", "resource"})

	applies = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_applies_total",
		Help:           "Server-side applies onto the target, by result (success, error; unchanged: not sent, the copy was as the last apply left it and this one would send the same).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "shard", "resource", "result"})

	deletes = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_deletes_total",
		Help:           "Target copies deleted, by reason: event (the object left the view), sweep (the periodic orphan sweep found it), finalizer (the view showed the object deleting, docs/mapper.md \"Deletion\") or orphaned (left in place and unmarked: deletion policy Orphan).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "shard", "resource", "reason"})

	finalizerWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_finalizer_writes_total",
		Help:           "Writes of the location's finalizer on source objects through the view (the deletion protocol, docs/mapper.md), by operation (add, remove) and result (success, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "shard", "resource", "operation", "result"})

	outcomeWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_outcome_writes_total",
		Help:           "Writes of the location's apply outcome record (outcome.kcp.io/<location>) on source objects through the view (docs/mapper.md, \"Outcome records\"), by operation (set, remove) and result (success, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "shard", "resource", "operation", "result"})

	paused = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "mapper_paused",
		Help:           "1 while the location's SyncTarget pauses the mapper (spec.paused) or halts the resource (spec.haltedResources; the series of resource \"\" is spec.paused): nothing is written or deleted on the target for it.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "shard", "resource"})

	conflictsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_conflicts_total",
		Help:           "Times an object went into conflict: the target already has an object of that name the mapper does not manage (or a namespace recording another origin).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "shard", "resource"})

	conflictsCurrent = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "mapper_conflicts",
		Help:           "View objects currently in conflict (not mapped, retried with backoff).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "shard", "resource"})

	identityRefusals = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_identity_refusals_total",
		Help:           "Syncs refused because the view object's identity is not its source's (no uid, or the view holds another object under its name): nothing is applied; retried with backoff.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "shard", "resource"})

	errorsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_errors_total",
		Help:           "Failed operations, by operation: apply, delete, namespace, status, sweep. Each is retried with backoff.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "shard", "resource", "operation"})

	resourceHalted = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "mapper_resource_halted",
		Help:           "1 while the target does not serve the resource (its CRD is missing): its objects wait until it appears.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "shard", "resource"})

	syncLag = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Name:           "mapper_sync_lag_seconds",
		Help:           "Time from the view event that made an object dirty until the target matched it (applied or deleted), including retries.",
		Buckets:        metrics.ExponentialBuckets(0.01, 4, 10),
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "shard", "resource"})

	statusWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_status_writes_total",
		Help:           "Status writes through the view's /status subresource, by result (success, conflict, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "shard", "resource", "result"})

	sweeps = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "mapper_orphan_sweeps_total",
		Help:           "Orphan sweeps, by result: completed, skipped (a view not synced, or the view empty), failed.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "shard", "result"})

	initialSyncComplete = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "mapper_initial_sync_complete",
		Help:           "1 once every object the view held at start-up has been processed once (also /readyz).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "shard"})

	viewClusters = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "mapper_view_clusters",
		Help:           "Logical clusters the location view holds objects of, over all resources.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "shard"})

	namespaceMappingInUse = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "mapper_namespace_mapping",
		Help:           "1 for the namespace mapping in force (same or prefixed), once --namespace-mapping=auto is resolved or an explicit mapping is set.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"location", "shard", "mapping"})

	registerMetricsOnce sync.Once
)

// gaugeInterval is how often updateGauges runs.
const gaugeInterval = 5 * time.Second

// updateGauges sets mapper_view_objects and mapper_view_clusters from the view informers'
// stores, and warns (once per start) when the view holds more than one logical cluster while
// the mapping in force is NamespaceMappingSame. It runs periodically rather than on every
// event: counting a store costs in proportion to its size.
func (m *Mapper) updateGauges(ctx context.Context) {
	clusters := sets.New[string]()
	for _, r := range m.resourceList() {
		keys := r.view.GetStore().ListKeys()
		m.metrics.viewObjects(r.name()).Set(float64(len(keys)))
		for _, k := range keys {
			if cluster, _, _, ok := contract.Key(k).Split(); ok {
				clusters.Insert(cluster)
			}
		}
	}
	m.metrics.viewClusters().Set(float64(clusters.Len()))
	if clusters.Len() > 1 && m.namespaceMapping() == NamespaceMappingSame && m.warnedSameMapping.CompareAndSwap(false, true) {
		klog.FromContext(ctx).Info("Warning: the view holds objects of several logical clusters but the namespace mapping is \"same\"; "+
			"objects of two clusters with the same namespace/name are conflicts (the first one mapped keeps the place). "+
			"The mapping is not changed on a filled target; see docs/mapper.md",
			"clusters", clusters.Len(), "examples", firstN(sets.List(clusters), 5))
	}
}

// firstN returns at most n elements of s.
func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// RegisterMetrics registers the mapper's metrics in the legacy registry; it is idempotent.
func RegisterMetrics() {
	registerMetricsOnce.Do(func() {
		legacyregistry.MustRegister(viewObjects, objectsMapped, applies, deletes, finalizerWrites, outcomeWrites, paused, conflictsTotal, conflictsCurrent,
			identityRefusals, errorsTotal, resourceHalted, syncLag, statusWrites, sweeps, initialSyncComplete, namespaceMappingInUse, viewClusters,
			relatedWrites)
	})
}
