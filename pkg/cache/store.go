package cache

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/rawjson"
)

// Defaults of StoreOptions.
const (
	// DefaultHistorySize is the default number of events kept for watch resumption. The
	// cacher sizes its buffer dynamically (up to ~100k events for 75s); 10000 covers a few
	// minutes of a busy source at a bounded memory cost (each event references two object
	// versions). Only events that touch at least one location are kept.
	DefaultHistorySize = 10000
	// DefaultWatcherBufferSize is the default number of events buffered per watcher before the
	// watcher is closed as too slow (the cacher uses 10-1000, depending on the resource).
	DefaultWatcherBufferSize = 1000
	// DefaultBookmarkInterval is how often a watch that allows bookmarks gets a BOOKMARK with the
	// store's current resourceVersion (only if the store moved past what the watch has seen).
	// The cacher uses about a minute; a shorter interval keeps the resume point of a quiet
	// location's watcher inside the history while other locations churn.
	DefaultBookmarkInterval = 5 * time.Second
	// DefaultSnapshotTTL is how long the snapshot behind a paginated list stays available for
	// its continue pages (kube-apiserver's continue tokens of the watch cache last about as
	// long as its event history, 75s).
	DefaultSnapshotTTL = 2 * time.Minute
	// DefaultMaxSnapshotsPerLocation bounds the snapshots kept per location.
	DefaultMaxSnapshotsPerLocation = 16
	// DefaultHistoryMaxAge is how long an event is kept for watch resumption at most: the
	// freshness kube-apiserver's watch cache sizes its buffer for (eventFreshDuration, 75 s).
	DefaultHistoryMaxAge = 75 * time.Second
)

// StoreOptions configures a ResourceStore. Zero values select the defaults.
type StoreOptions struct {
	// DefaultCluster is the logical cluster of every object of a plain source (docs/design.md,
	// "Names": a plain Kubernetes source is one logical cluster, named by configuration; a
	// kcp.io/cluster annotation a user wrote on an object is ignored). Unused when
	// ClusterFromAnnotation is set.
	DefaultCluster string
	// ClusterFromAnnotation selects a kcp source: an object's logical cluster is its
	// kcp.io/cluster annotation (kcp sets it on every object read through the wildcard
	// endpoint). An object without it, or with an invalid cluster name, is counted
	// (mapper_apiserver_invalid_cluster_total), logged once per object version and not stored.
	ClusterFromAnnotation bool
	// HistorySize is the number of events kept for watch resumption (DefaultHistorySize).
	HistorySize int
	// HistoryMaxAge is how long an event is kept for watch resumption at most
	// (DefaultHistoryMaxAge; negative: no age bound).
	HistoryMaxAge time.Duration
	// HistoryBudget, when not nil, bounds the memory the histories of every store sharing it
	// keep alive together (history.go). nil: no memory bound.
	HistoryBudget *HistoryBudget
	// HistoryMaxObjectSize is the size of an object's JSON above which a superseded version is
	// not kept in the history (history.go); 0: every version is kept.
	HistoryMaxObjectSize int
	// Renderer, when not nil, makes the renderings that run a Customization's CEL, away from
	// ingest (renderer.go); nil: they are made when a version is stored, as every other
	// rendering.
	Renderer *Renderer
	// WatcherBufferSize is the number of events buffered per watcher before it is closed as
	// too slow (DefaultWatcherBufferSize).
	WatcherBufferSize int
	// BookmarkInterval is how often watchers that allow bookmarks get one
	// (DefaultBookmarkInterval).
	BookmarkInterval time.Duration
	// SnapshotTTL is how long list snapshots are kept for continue pages (DefaultSnapshotTTL).
	SnapshotTTL time.Duration
	// MaxSnapshotsPerLocation bounds the list snapshots per location
	// (DefaultMaxSnapshotsPerLocation).
	MaxSnapshotsPerLocation int
	// Clock is the time source (tests use a fake clock); default the real clock. It needs
	// tickers (periodic bookmarks), hence clock.WithTicker.
	Clock clock.WithTicker
	// DeletionPending, when not nil, is called each time a location's view starts showing an
	// object deleting (deletion.go), with the store's lock held: it must return at once (queue
	// the work). mapper-apiserver records an Event on the object from it.
	DeletionPending func(PendingDeletion)
	// MaxRenderingBytes bounds the size of a rendering (pkg/rendercheck.TooLarge: 0 is
	// rendercheck.DefaultMaxBytes, negative no bound); a larger one is refused as a failed
	// rendering and not kept (mapper-apiserver --max-rendering-bytes).
	MaxRenderingBytes int64
}

// withDefaults returns o with zero fields defaulted.
func (o StoreOptions) withDefaults() StoreOptions {
	if o.HistorySize <= 0 {
		o.HistorySize = DefaultHistorySize
	}
	switch {
	case o.HistoryMaxAge == 0:
		o.HistoryMaxAge = DefaultHistoryMaxAge
	case o.HistoryMaxAge < 0:
		o.HistoryMaxAge = 0
	}
	if o.WatcherBufferSize <= 0 {
		o.WatcherBufferSize = DefaultWatcherBufferSize
	}
	if o.BookmarkInterval <= 0 {
		o.BookmarkInterval = DefaultBookmarkInterval
	}
	if o.SnapshotTTL <= 0 {
		o.SnapshotTTL = DefaultSnapshotTTL
	}
	if o.MaxSnapshotsPerLocation <= 0 {
		o.MaxSnapshotsPerLocation = DefaultMaxSnapshotsPerLocation
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// ResourceStore holds one mirrored resource (one GroupVersionResource) of the source: its
// objects, the per-location index, the event history and the location watchers.
//
// The ingest side (Add, Update, Delete, Replace, UpdateResourceVersion: a client-go
// cache.ReflectorStore and cache.ResourceVersionUpdater) is written by one client-go
// Reflector, in event order, like kube-apiserver's cacher feeds its watchCache. The query side
// (Get, List, Watch, ...) is safe for concurrent use with ingest: each event is applied
// atomically under a mutex, so readers never see a half-applied event.
type ResourceStore struct {
	gvr        schema.GroupVersionResource
	gvk        schema.GroupVersionKind
	namespaced bool
	opts       StoreOptions
	clock      clock.WithTicker
	metrics    *storeMetrics

	// writeMu serializes the writers. Holding it, a writer may read objects without mu
	// (only writers change it, under mu).
	writeMu sync.Mutex

	mu      sync.RWMutex
	objects map[contract.Key]*Object
	// byUID maps the UID of each stored object to its key, only with ClusterFromAnnotation:
	// an object whose kcp.io/cluster changes (kcp never does that, but the store does not rely
	// on it) changes its key, and the store must then delete the old key (no ghost copy).
	byUID map[types.UID]contract.Key
	// rejected maps the UID of each object whose version was not stored, for want of a valid
	// logical cluster or for content that does not decode, to the resourceVersion last
	// rejected, so that each version is counted and logged once.
	// Guarded by writeMu.
	rejected map[types.UID]string
	// failingObjects are the objects whose rendering fails, or is pending, for some location
	// (render.go): a GET of one withheld from the view answers 503 rather than 404, and
	// RenderFailures reports the failures, without scanning the store.
	failingObjects map[contract.Key]*Object
	// locs has an entry for every location that holds objects or watchers of this resource.
	// An entry is freed as soon as it holds neither (releaseLocked), so location names seen
	// once (in an annotation or a URL) do not stay in memory.
	locs map[string]*locationIndex
	// freedChangeRV is the highest lastChangeRV of a freed location entry: a location without
	// an entry has not changed since, at the latest, that RV (List with SnapshotRV).
	freedChangeRV uint64
	// locsPeak is the largest len(locs) since locs was last rebuilt: Go maps never shrink, so
	// after a churn of names releaseLocked moves the entries left into a new map.
	locsPeak int
	rv       uint64
	// streamRV is the highest resourceVersion the source's stream (events, lists, bookmarks)
	// reached. rv is above it only after a re-rendering took a fresh resourceVersion from the
	// source (SetRules); an event of the stream at or below rv then is late
	// (noteStreamLocked).
	streamRV uint64
	synced   bool
	closed   bool
	// created is when the store was made (how long it has been unsynced, for Retry-After).
	created time.Time
	// syncErr is the error of the last failed list of the source, nil after a success
	// (setSyncError).
	syncErr error
	history history
	// bookmarks schedules the periodic bookmarks of the watchers that allow them
	// (periodic.go).
	bookmarks bookmarkSchedule
	// changed is closed (and replaced) when rv, synced or closed change while waiters > 0.
	changed chan struct{}
	waiters int

	snaps *snapshots

	// rules are the Customizations and locations the store renders with (rules.go).
	rules storeRules
	// typeMeta is the apiVersion and kind of the resource's objects, shared by the objects
	// stored from the source's bytes that carry them (buildFromJSON).
	typeMeta metav1.TypeMeta
	// intern holds the label keys and values and namespaces of the stored objects once
	// (buildFromJSON). Guarded by writeMu.
	intern rawjson.Interner
}

// NewResourceStore returns an empty store for the resource gvr of kind gvk. namespaced says
// whether the resource is namespaced (for a cluster-scoped resource the namespace of objects is
// ignored). The store starts unsynced: HasSynced turns true with the first Replace.
func NewResourceStore(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind, namespaced bool, opts StoreOptions) *ResourceStore {
	opts = opts.withDefaults()
	return &ResourceStore{
		gvr:            gvr,
		gvk:            gvk,
		namespaced:     namespaced,
		opts:           opts,
		clock:          opts.Clock,
		metrics:        newStoreMetrics(gvr.GroupResource().String()),
		objects:        map[contract.Key]*Object{},
		byUID:          map[types.UID]contract.Key{},
		rejected:       map[types.UID]string{},
		failingObjects: map[contract.Key]*Object{},
		locs:           map[string]*locationIndex{},
		history: history{size: opts.HistorySize, maxAge: opts.HistoryMaxAge, maxObjectSize: opts.HistoryMaxObjectSize,
			budget: opts.HistoryBudget, evicted: newEvictionCounters(gvr.GroupResource().String())},
		bookmarks: newBookmarkSchedule(opts.BookmarkInterval),
		changed:   make(chan struct{}),
		snaps:     newSnapshots(opts.SnapshotTTL, opts.MaxSnapshotsPerLocation),
		created:   opts.Clock.Now(),
		typeMeta:  metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind},
	}
}

// GVR returns the store's resource.
func (s *ResourceStore) GVR() schema.GroupVersionResource { return s.gvr }

// GVK returns the kind of the store's objects.
func (s *ResourceStore) GVK() schema.GroupVersionKind { return s.gvk }

// Namespaced reports whether the resource is namespaced.
func (s *ResourceStore) Namespaced() bool { return s.namespaced }

// ResourceVersion returns the highest resourceVersion the store has processed (events, Replace,
// and the source's bookmarks via UpdateResourceVersion).
func (s *ResourceStore) ResourceVersion() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rv
}

// HasSynced reports whether the first Replace (the initial list of the source) is done.
func (s *ResourceStore) HasSynced() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.synced
}

// WaitForResourceVersion blocks until ResourceVersion() >= rv. It returns ctx.Err() when ctx
// ends first, and a ServiceUnavailable error when the store is closed first. The view uses it
// for consistent reads: fetch the source's current RV (source.Source.ResourceVersion), wait, read.
func (s *ResourceStore) WaitForResourceVersion(ctx context.Context, rv uint64) error {
	if err := s.waitUntil(ctx, func() bool { return s.rv >= rv || s.closed }); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.rv < rv {
		return s.closedError()
	}
	return nil
}

// waitUntil blocks until cond (evaluated under s.mu) holds or ctx ends (ctx.Err()).
func (s *ResourceStore) waitUntil(ctx context.Context, cond func() bool) error {
	s.mu.RLock()
	ok := cond()
	s.mu.RUnlock()
	if ok {
		return nil
	}
	for {
		s.mu.Lock()
		if cond() {
			s.mu.Unlock()
			return nil
		}
		s.waiters++
		ch := s.changed
		s.mu.Unlock()

		var err error
		select {
		case <-ch:
		case <-ctx.Done():
			err = ctx.Err()
		}
		s.mu.Lock()
		s.waiters--
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// notifyLocked wakes waitUntil callers. Called with s.mu held for writing.
func (s *ResourceStore) notifyLocked() {
	if s.waiters > 0 {
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

// trimHistory drops the events of the history that its age and memory bounds no longer allow
// (history.trim); the write lock is taken only when there are some.
func (s *ResourceStore) trimHistory() {
	now := s.clock.Now()
	s.mu.RLock()
	need := s.history.needsTrim(now)
	s.mu.RUnlock()
	if !need {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.history.trim(now)
}

// closedError is returned by calls on a closed store (the resource left the source).
func (s *ResourceStore) closedError() error {
	return apierrors.NewServiceUnavailable(fmt.Sprintf("%s is no longer mirrored from the source", s.gvr.GroupResource()))
}

// Close ends the store: every watch ends (its result channel is closed), waiters return, and
// the store drops its content. Used when the resource disappears from the source. Idempotent.
func (s *ResourceStore) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	for _, li := range s.locs {
		for _, w := range append([]*watcher(nil), li.watchers...) {
			w.signalStop()
			s.unregisterLocked(w)
		}
		if li.deleting != 0 {
			pendingDeletions.WithLabelValues(li.name).Add(-float64(li.deleting))
		}
	}
	s.metrics.objects.Add(-float64(len(s.objects)))
	s.objects = map[contract.Key]*Object{}
	s.byUID = map[types.UID]contract.Key{}
	s.failingObjects = map[contract.Key]*Object{}
	s.locs = map[string]*locationIndex{}
	s.history.reset(s.rv)
	s.snaps.reset()
	s.notifyLocked()
}

// LocationStats describes one location within a store (or, from Cache.Locations, across all
// mirrored resources).
type LocationStats struct {
	// Objects is the number of objects in the location's view: assigned to it, or carrying its
	// finalizer (deletion.go).
	Objects int
	// Deleting is the number of those whose view shows a deletionTimestamp: deletions pending
	// at the location (docs/views.md, "Deletion").
	Deleting int
	// Watchers is the number of open watches of the location.
	Watchers int
	// FirstSeen is when the location was first seen (earliest over resources for
	// Cache.Locations); it restarts with the process.
	FirstSeen time.Time
	// Resources counts the location's objects per resource (only resources with objects).
	Resources map[schema.GroupResource]int
	// Clusters counts the location's objects per logical cluster (only clusters with
	// objects).
	Clusters map[string]int
}

// Locations returns the stats of every location that has at least one object or one watcher in
// this resource.
func (s *ResourceStore) Locations() map[string]LocationStats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]LocationStats, len(s.locs))
	gr := s.gvr.GroupResource()
	for name, li := range s.locs {
		n := li.tree.Len()
		if n == 0 && len(li.watchers) == 0 {
			continue
		}
		st := LocationStats{Objects: n, Deleting: li.deleting, Watchers: len(li.watchers), FirstSeen: li.firstSeen}
		if n > 0 {
			st.Resources = map[schema.GroupResource]int{gr: n}
			st.Clusters = make(map[string]int, len(li.clusters))
			for c, k := range li.clusters {
				st.Clusters[c] = k
			}
		}
		out[name] = st
	}
	return out
}

// Namespaces returns the namespaces that hold objects of location in this resource, with the
// number of the location's objects in each ("" for cluster-scoped resources): of the part of
// the location part (the whole location, some logical clusters, a hash shard; a namespace of
// several clusters is counted once, with the sum of their objects). The cost grows with the
// location's (cluster, namespace) pairs, never with its objects.
func (s *ResourceStore) Namespaces(location string, part contract.ViewPart) map[string]int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	li := s.locs[location]
	if li == nil {
		return map[string]int{}
	}
	out := make(map[string]int, len(li.namespaces))
	for cn, n := range li.namespaces {
		if part.Contains(cn.cluster, cn.namespace) {
			out[cn.namespace] += n
		}
	}
	return out
}

// locationLocked returns the index of location name, creating it. Called with s.mu held for
// writing; the caller releases it (releaseLocked) when it may have left it empty.
func (s *ResourceStore) locationLocked(name string) *locationIndex {
	li := s.locs[name]
	if li == nil {
		li = newLocationIndex(name, s.clock.Now())
		s.locs[name] = li
		s.locsPeak = max(s.locsPeak, len(s.locs))
	}
	return li
}

// releaseLocked frees the entry li when it holds no objects and no watchers; the snapshots of
// paginated lists are kept apart (snapshots) and expire on their own. Called with s.mu held for
// writing.
func (s *ResourceStore) releaseLocked(li *locationIndex) {
	if li.tree.Len() > 0 || len(li.watchers) > 0 || s.locs[li.name] != li {
		return
	}
	delete(s.locs, li.name)
	s.freedChangeRV = max(s.freedChangeRV, li.lastChangeRV)
	if s.locsPeak >= locsRebuildMin && len(s.locs) <= s.locsPeak/4 {
		locs := make(map[string]*locationIndex, len(s.locs))
		for name, li := range s.locs {
			locs[name] = li
		}
		s.locs = locs
		s.locsPeak = len(locs)
	}
}

// locsRebuildMin is the size below which the location map is never rebuilt (releaseLocked).
const locsRebuildMin = 1024
