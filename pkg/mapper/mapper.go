package mapper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Mapper keeps a target cluster equal to one location's view (invariants 1–4 of docs/design.md):
// dynamic informers on the view feed a rate-limited work queue whose workers apply each
// object onto the target with server-side apply or delete its copy; informers on the managed
// target objects feed the status write-back; a periodic sweep deletes orphans.
type Mapper struct {
	cfg Config

	view            dynamic.Interface
	clusterViews    *ClusterViews
	viewDiscovery   discovery.DiscoveryInterface
	target          dynamic.Interface
	targetMetadata  metadata.Interface
	targetDiscovery discovery.DiscoveryInterface
	recorder        events.EventRecorder
	broadcaster     events.EventBroadcaster

	syncQueue   workqueue.TypedRateLimitingInterface[itemKey]
	statusQueue workqueue.TypedRateLimitingInterface[itemKey]

	mu        sync.RWMutex
	resources map[schema.GroupVersionResource]*resource
	// schemaChecks are the last comparisons of the schemas per group version (checkSchemas;
	// refreshResources' goroutine only).
	schemaChecks map[schema.GroupVersion]schemaCheck
	// viewDiscovered is set once the view's discovery has been read completely.
	viewDiscovered atomic.Bool

	// mapping holds the NamespaceMapping in force (never NamespaceMappingAuto) once
	// mappingResolved is closed; see resolveMapping.
	mapping         atomic.Value
	mappingResolved chan struct{}
	// warnedSameMapping is set once the warning about several clusters under
	// NamespaceMappingSame has been logged.
	warnedSameMapping atomic.Bool

	// mappings are the ResourceMappings of the view and the projections they decide.
	mappings *resourceMappings
	// related keeps the related copies of origin Target (related.go).
	related    *relatedCopies
	namespaces *namespaces
	places     *places
	pause      *pauseState
	states     *objectStates
	progress   *progress
	// metrics is this mapper's series of the mapper metrics (label location).
	metrics locationMetrics
}

// New validates cfg and builds a Mapper; Run starts it. It returns an error when a client
// cannot be built or the location is empty.
func New(cfg Config) (*Mapper, error) {
	cfg.complete()
	if cfg.Location == "" {
		return nil, errors.New("a location is required")
	}
	if cfg.View == nil || cfg.Target == nil {
		return nil, errors.New("view and target client configs are required")
	}
	// Lists, watches and discovery go to the mapper's part of the view; writes by name go to
	// the per-cluster paths within the part's shard (clusterViews).
	partView := PartConfig(cfg.View, cfg.Part)
	view, err := dynamic.NewForConfig(partView)
	if err != nil {
		return nil, fmt.Errorf("view client: %w", err)
	}
	clusterViews, err := NewClusterViews(cfg.View, cfg.Part.Shard)
	if err != nil {
		return nil, fmt.Errorf("view client: %w", err)
	}
	viewDiscovery, err := discovery.NewDiscoveryClientForConfig(partView)
	if err != nil {
		return nil, fmt.Errorf("view discovery client: %w", err)
	}
	target, err := dynamic.NewForConfig(cfg.Target)
	if err != nil {
		return nil, fmt.Errorf("target client: %w", err)
	}
	targetMetadata, err := metadata.NewForConfig(cfg.Target)
	if err != nil {
		return nil, fmt.Errorf("target metadata client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg.Target)
	if err != nil {
		return nil, fmt.Errorf("target client: %w", err)
	}
	RegisterMetrics()
	metrics := locationMetrics{location: cfg.Location, shard: cfg.Part.String()}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: kube.EventsV1()})
	m := &Mapper{
		cfg:             cfg,
		view:            view,
		clusterViews:    clusterViews,
		viewDiscovery:   viewDiscovery,
		target:          target,
		targetMetadata:  targetMetadata,
		targetDiscovery: kube.Discovery(),
		broadcaster:     broadcaster,
		recorder:        broadcaster.NewRecorder(scheme.Scheme, cfg.FieldManager),
		syncQueue:       newQueue("mapper_sync", cfg.RetryBaseDelay, cfg.RetryMaxDelay),
		statusQueue:     newQueue("mapper_status", cfg.RetryBaseDelay, cfg.RetryMaxDelay),
		resources:       map[schema.GroupVersionResource]*resource{},
		states:          newObjectStates(metrics),
		metrics:         metrics,
		mappingResolved: make(chan struct{}),
		places:          newPlaces(),
		pause:           newPauseState(cfg.AwaitPause),
		mappings:        newResourceMappings(),
	}
	if cfg.NamespaceMapping != NamespaceMappingAuto {
		m.setMapping(cfg.NamespaceMapping)
	}
	m.namespaces = newNamespaces(kube, cfg.Location)
	m.progress = newProgress(m)
	m.related = newRelatedCopies(m)
	return m, nil
}

// Run maps until ctx ends: it discovers the resources, starts their informers and the
// workers, logs the initial sync's progress, and sweeps orphans periodically. It returns nil
// when ctx ends, or an error when the event broadcaster cannot start or --namespace-mapping=auto
// cannot be resolved (ResolveNamespaceMapping).
func (m *Mapper) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("location", m.cfg.Location)
	if !m.cfg.Part.Whole() {
		logger = logger.WithValues("shard", m.cfg.Part.String())
	}
	ctx = klog.NewContext(ctx, logger)
	if err := m.broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return fmt.Errorf("starting the event broadcaster: %w", err)
	}
	defer m.broadcaster.Shutdown()
	// Runs last, once every worker has stopped setting gauges (wg.Wait is deferred below).
	defer m.metrics.deleteGauges()
	defer m.syncQueue.ShutDown()
	defer m.statusQueue.ShutDown()
	logger.Info("Starting the mapper", "view", m.cfg.View.Host, "target", m.cfg.Target.Host,
		"namespaceMapping", m.cfg.NamespaceMapping, "fieldManager", m.cfg.FieldManager, "workers", m.cfg.Workers)

	var wg sync.WaitGroup
	defer wg.Wait()
	// Everything below stops when Run returns, also when it returns early with an error.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer m.stopResources()

	wg.Add(1)
	go func() {
		defer wg.Done()
		m.runRefresh(ctx)
	}()
	resolveErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if m.cfg.NamespaceMapping != NamespaceMappingAuto {
			m.checkExplicitMapping(ctx)
		} else if err := m.resolveMapping(ctx); err != nil {
			resolveErr <- err
		}
	}()
	for i := 0; i < m.cfg.Workers; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			// Nothing is written on the target before the SyncTarget says whether the
			// location is paused (Config.AwaitPause).
			if !m.waitMapping(ctx) || !m.pause.wait(ctx) {
				return
			}
			for m.processNext(ctx, m.syncQueue, m.sync) {
			}
		}()
		go func() {
			defer wg.Done()
			if !m.waitMapping(ctx) {
				return
			}
			for m.processNext(ctx, m.statusQueue, m.reflectStatus) {
			}
		}()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		m.progress.run(ctx)
	}()
	go func() {
		defer wg.Done()
		wait.UntilWithContext(ctx, m.updateGauges, gaugeInterval)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Related copies are written through the view once the location's pause is known; the
		// loop reads the ResourceMappings that refreshResources lists.
		if !m.waitMapping(ctx) || !m.pause.wait(ctx) {
			return
		}
		m.related.run(ctx, relatedWorkers)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if !m.waitMapping(ctx) || !m.pause.wait(ctx) || !m.progress.waitComplete(ctx) {
			return
		}
		wait.UntilWithContext(ctx, m.sweep, m.cfg.SweepInterval)
	}()

	var err error
	select {
	case <-ctx.Done():
		logger.Info("Stopping the mapper")
	case err = <-resolveErr:
		logger.Error(err, "Stopping the mapper: the namespace mapping cannot be resolved")
	}
	m.syncQueue.ShutDown()
	m.statusQueue.ShutDown()
	return err
}

// InitialSyncComplete reports whether every object the view held at start-up has been
// processed once (mapped, in conflict or failed and retrying); /readyz reports it.
func (m *Mapper) InitialSyncComplete() bool { return m.progress.complete() }

// discovered reports whether the view's discovery has been read completely once.
func (m *Mapper) discovered() bool { return m.viewDiscovered.Load() }

// errRequeue asks processNext to retry an item after a short fixed delay without counting a
// failure (a view informer that has not caught up yet).
var errRequeue = errors.New("requeue")

// requeueDelay is the delay of errRequeue.
const requeueDelay = time.Second

// processNext takes one item from q and runs fn on it: on success the item's backoff is
// reset, on errRequeue it is retried after requeueDelay, on any other error with exponential
// backoff. It returns false once q is shut down.
func (m *Mapper) processNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[itemKey], fn func(context.Context, itemKey) error) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	err := fn(ctx, key)
	switch {
	case err == nil:
		q.Forget(key)
	case errors.Is(err, errRequeue):
		q.AddAfter(key, requeueDelay)
	default:
		q.AddRateLimited(key)
	}
	return true
}
