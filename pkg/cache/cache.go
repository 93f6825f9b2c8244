package cache

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// DefaultDiscoveryInterval is how often the source's discovery is re-read by default.
const DefaultDiscoveryInterval = 5 * time.Second

// Source is what the cache needs of the source API server: its discovery, the list and watch
// of each mirrored resource (all namespaces; client-go's reflector runs them), and its current
// resourceVersion (the consistent-read probe before a re-rendering, SetRules). *source.Source
// implements it; the cache itself holds no client.
type Source interface {
	// Discover selects the resources to mirror from the source's discovery (source.Source.Discover).
	Discover(wanted []schema.GroupResource) (infos []source.ResourceInfo, failedGroups sets.Set[string], err error)
	// List lists gvr in all namespaces.
	List(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (runtime.Object, error)
	// Watch watches gvr in all namespaces.
	Watch(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (watch.Interface, error)
	// ResourceVersion returns the source's current resourceVersion of gvr.
	ResourceVersion(ctx context.Context, gvr schema.GroupVersionResource) (uint64, error)
	// IsWatchListSemanticsUnSupported reports whether List and Watch cannot serve streaming
	// lists (client-go's watchlist.DoesClientNotSupportWatchListSemantics).
	IsWatchListSemanticsUnSupported() bool
}

// Config configures a Cache.
type Config struct {
	// Source is the source API server to mirror.
	Source Source
	// Resources are the group resources to mirror. Empty means every namespaced resource the
	// source serves with list and watch, at its preferred version, except events (core and
	// events.k8s.io) and leases (coordination.k8s.io); subresources are never mirrored.
	Resources []schema.GroupResource
	// Store configures each resource's ResourceStore.
	Store StoreOptions
	// DiscoveryInterval is how often the source's discovery is re-read to pick up new and
	// removed resources (CRDs); default DefaultDiscoveryInterval.
	DiscoveryInterval time.Duration
	// WaitForRules makes Run wait for the first SetRules before it mirrors anything, so that no
	// view ever shows an object rendered without the Customizations (the server sets it when it
	// follows Customizations).
	WaitForRules bool
	// FenceTimeout bounds how long Run waits, before its first lists, for the source's
	// resourceVersion to move past the one it reads at start-up (fence); 0 does not wait.
	FenceTimeout time.Duration
}

// Cache mirrors the selected resources of one source: one client-go Reflector per resource
// writes into that resource's ResourceStore, and the set of resources follows the source's
// discovery.
type Cache struct {
	cfg Config

	mu         sync.RWMutex
	mirrors    map[schema.GroupVersionResource]*mirror
	discovered bool
	// initial are the resources of the first successful discovery: readiness waits for them
	// only (HasSynced); resources found later are gated one by one (WaitUntilSynced).
	initial sets.Set[schema.GroupVersionResource]
	// ready latches HasSynced once it held.
	ready bool

	// rules are the rules new stores start with (SetRules), rulesSeq counts the SetRules calls
	// (both guarded by mu); rulesMu serializes the re-renderings of SetRules.
	rules     storeRules
	rulesSeq  uint64
	rulesMu   sync.Mutex
	rulesOnce sync.Once
	// rulesSet is closed by the first SetRules.
	rulesSet chan struct{}
}

// mirror is one mirrored resource: its store and its running reflector.
type mirror struct {
	info   source.ResourceInfo
	store  *ResourceStore
	cancel context.CancelFunc
	done   chan struct{}
}

// New validates cfg and returns a Cache; Run starts it.
func New(cfg Config) (*Cache, error) {
	if cfg.Source == nil {
		return nil, fmt.Errorf("cache: Config.Source is required")
	}
	if cfg.DiscoveryInterval <= 0 {
		cfg.DiscoveryInterval = DefaultDiscoveryInterval
	}
	if r := cfg.Store.Renderer; r != nil {
		r.setSource(cfg.Source.ResourceVersion)
	}
	return &Cache{
		cfg:      cfg,
		mirrors:  map[schema.GroupVersionResource]*mirror{},
		rulesSet: make(chan struct{}),
	}, nil
}

// Run reads the source's discovery every DiscoveryInterval and keeps one reflector per selected
// resource running: a resource that appears gets a new store and reflector, one that
// disappears has its reflector stopped and its store closed (its watches end cleanly). It
// also runs the stores' Renderer (StoreOptions.Renderer) and drops the events the histories'
// age and memory bounds no longer allow (sweepHistories). Run returns when ctx ends, after
// stopping every reflector and closing every store.
func (c *Cache) Run(ctx context.Context) {
	defer c.stopAll()
	if r := c.cfg.Store.Renderer; r != nil {
		go r.Run(ctx)
	}
	go wait.UntilWithContext(ctx, c.sweepHistories, historySweepInterval)
	if c.cfg.WaitForRules {
		select {
		case <-c.rulesSet:
		case <-ctx.Done():
			return
		}
	}
	t := time.NewTicker(c.cfg.DiscoveryInterval)
	defer t.Stop()
	for {
		c.syncResources(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// syncResources reconciles the mirrored resources with the source's discovery.
func (c *Cache) syncResources(ctx context.Context) {
	infos, failedGroups, err := c.cfg.Source.Discover(c.cfg.Resources)
	if err != nil {
		klog.ErrorS(err, "Reading the source's discovery failed; keeping the mirrored resources")
		return
	}
	if len(failedGroups) > 0 {
		klog.V(2).InfoS("Discovery of some source API groups failed; keeping their mirrored resources", "groups", sets.List(failedGroups))
	}
	want := make(map[schema.GroupVersionResource]source.ResourceInfo, len(infos))
	for _, info := range infos {
		want[info.GVR] = info
	}
	if !c.discovered && len(infos) > 0 {
		c.fence(ctx, infos[0].GVR)
	}

	var stopped []*mirror
	c.mu.Lock()
	for gvr, m := range c.mirrors {
		if _, ok := want[gvr]; ok || failedGroups.Has(gvr.Group) {
			continue
		}
		delete(c.mirrors, gvr)
		stopped = append(stopped, m)
	}
	for gvr, info := range want {
		if m, ok := c.mirrors[gvr]; ok {
			m.info = info
			continue
		}
		if ctx.Err() != nil {
			break
		}
		c.mirrors[gvr] = c.startMirror(ctx, info)
		klog.V(1).InfoS("Mirroring a source resource", "resource", gvr.String(), "kind", info.Kind)
	}
	if !c.discovered {
		c.initial = sets.KeySet(want)
	}
	c.discovered = true
	c.mu.Unlock()

	for _, m := range stopped {
		klog.V(1).InfoS("The source no longer serves a resource; stopped mirroring it", "resource", m.info.GVR.String())
		m.stop()
	}
}

// historySweepInterval is how often the histories are trimmed to their age and memory bounds
// (their own writes trim them too).
const historySweepInterval = time.Second

// sweepHistories drops from every store's history the events its age and memory bounds no
// longer allow, so that a resource that is no longer written does not keep them.
func (c *Cache) sweepHistories(context.Context) {
	c.mu.RLock()
	stores := make([]*ResourceStore, 0, len(c.mirrors))
	for _, m := range c.mirrors {
		stores = append(stores, m.store)
	}
	c.mu.RUnlock()
	for _, s := range stores {
		s.trimHistory()
	}
}

// stop stops the mirror's reflector and closes its store.
func (m *mirror) stop() {
	m.cancel()
	<-m.done
	m.store.Close()
}

// stopAll stops every mirror (Run ending).
func (c *Cache) stopAll() {
	c.mu.Lock()
	mirrors := c.mirrors
	c.mirrors = map[schema.GroupVersionResource]*mirror{}
	c.discovered = false // the resources are no longer known: see Discovered
	c.mu.Unlock()
	for _, m := range mirrors {
		m.cancel()
	}
	for _, m := range mirrors {
		m.stop()
	}
}

// HasSynced reports whether the server is ready to serve (readyz): the source's discovery was
// read and every resource of that first discovery that is still mirrored has synced, or the
// source refused to list it (a Status other than 429 or 5xx, e.g. 403 when the server's RBAC
// does not cover it; it is reported by ResourceStore.SyncError, a log line and
// mapper_apiserver_source_list_errors_total, and its views answer 429). Resources discovered
// later never make the server unready: each is gated on its own (WaitUntilSynced), so a new
// CRD cannot take every replica, and with them the APIService, out of service. Once true,
// HasSynced stays true.
func (c *Cache) HasSynced() bool {
	c.mu.RLock()
	if c.ready {
		c.mu.RUnlock()
		return true
	}
	if !c.discovered {
		c.mu.RUnlock()
		return false
	}
	for gvr := range c.initial {
		m, ok := c.mirrors[gvr]
		if !ok || m.store.HasSynced() || refusedBySource(m.store.SyncError()) {
			continue
		}
		c.mu.RUnlock()
		return false
	}
	c.mu.RUnlock()
	c.mu.Lock()
	c.ready = true
	c.mu.Unlock()
	return true
}

// refusedBySource reports whether err is an answer of the source that retrying will not change
// soon: a Status that is neither 429 nor a server error (5xx), such as 403 Forbidden.
func refusedBySource(err error) bool {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) {
		return false
	}
	code := status.Status().Code
	return code >= 400 && code < 500 && code != http.StatusTooManyRequests
}

// Discovered reports whether the mirrored resources are known: the first read of the source's
// discovery is done (and, with Config.FenceTimeout, the fence passed), and Run has not ended.
// Before and after, Resources is empty although the source serves resources: a resource that
// is not mirrored may be about to be, or may have been until the server began shutting down
// (the generic server keeps serving for a while after its post-start hooks' context ended).
func (c *Cache) Discovered() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.discovered
}

// Resources returns the currently mirrored resources, sorted by group, resource, version.
func (c *Cache) Resources() []source.ResourceInfo {
	c.mu.RLock()
	out := make([]source.ResourceInfo, 0, len(c.mirrors))
	for _, m := range c.mirrors {
		out = append(out, m.info)
	}
	c.mu.RUnlock()
	source.SortResources(out)
	return out
}

// Store returns the store of a mirrored resource.
func (c *Cache) Store(gvr schema.GroupVersionResource) (*ResourceStore, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	m, ok := c.mirrors[gvr]
	if !ok {
		return nil, false
	}
	return m.store, true
}

// Locations returns the stats of every location with at least one object or watcher in any
// mirrored resource, merged over resources: Objects, Deleting and Watchers summed, FirstSeen the
// earliest, Resources the per-resource and Clusters the per-logical-cluster object counts.
func (c *Cache) Locations() map[string]LocationStats {
	c.mu.RLock()
	stores := make([]*ResourceStore, 0, len(c.mirrors))
	for _, m := range c.mirrors {
		stores = append(stores, m.store)
	}
	c.mu.RUnlock()
	out := map[string]LocationStats{}
	for _, s := range stores {
		for loc, st := range s.Locations() {
			agg, ok := out[loc]
			if !ok {
				agg = LocationStats{FirstSeen: st.FirstSeen, Resources: map[schema.GroupResource]int{}, Clusters: map[string]int{}}
			}
			agg.Objects += st.Objects
			agg.Deleting += st.Deleting
			agg.Watchers += st.Watchers
			if st.FirstSeen.Before(agg.FirstSeen) {
				agg.FirstSeen = st.FirstSeen
			}
			for gr, n := range st.Resources {
				agg.Resources[gr] += n
			}
			for cl, n := range st.Clusters {
				agg.Clusters[cl] += n
			}
			out[loc] = agg
		}
	}
	return out
}
