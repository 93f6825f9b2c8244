package apiserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	utilcompatibility "k8s.io/apiserver/pkg/util/compatibility"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper/v1alpha1"
	locationauthorizer "github.com/cluster-mapper/cluster-mapper/pkg/authorizer"
	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	generatedopenapi "github.com/cluster-mapper/cluster-mapper/pkg/generated/openapi"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationevents"
	"github.com/cluster-mapper/cluster-mapper/pkg/registry/location"
	"github.com/cluster-mapper/cluster-mapper/pkg/registry/view"
	"github.com/cluster-mapper/cluster-mapper/pkg/rendercheck"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
	"github.com/cluster-mapper/cluster-mapper/pkg/sourcecluster"
)

// Options are the command-line options of mapper-apiserver: the generic aggregated-server
// options (secure serving, delegated authentication and authorization, audit, features) and
// the source to mirror.
type Options struct {
	RecommendedOptions *genericoptions.RecommendedOptions

	// SourceKubeconfig is the kubeconfig of the source API server; empty means what client-go
	// does by default ($KUBECONFIG, ~/.kube/config, then in-cluster).
	SourceKubeconfig string
	// SourceQPS and SourceBurst limit the server's own requests to the source (consistent-read
	// probes, live GETs); list and watch of the mirrored resources are long-running.
	SourceQPS   float32
	SourceBurst int
	// Resources are the mirrored resources as "resource.group" ("configmaps" for the core
	// group, "deployments.apps"); empty mirrors every namespaced resource the source serves with
	// list and watch, minus events and leases.
	Resources []string
	// Clusters are --source-mode, --cluster-name and --source-cluster-path: how an object's
	// logical cluster is found, and where reads by name and status write-back go.
	Clusters *sourcecluster.Options

	HistorySize int
	// HistoryAge bounds the age of the events kept for watch resumption (docs/views.md,
	// "Event history"); HistoryMemory the memory they keep alive, across resources (bytes);
	// HistoryMaxObjectSize the size of a version kept in it once superseded (bytes).
	HistoryAge           time.Duration
	HistoryMemory        int64
	HistoryMaxObjectSize int
	// RenderWorkers, RenderCostPerObject and RenderCostPerSecond configure the Renderer that
	// makes the renderings of Customizations away from ingest, fairly per namespace
	// (cache.RendererOptions; docs/customization.md, "Fairness and budgets").
	RenderWorkers       int
	RenderCostPerObject int64
	RenderCostPerSecond int64
	// MaxCustomizationsPerNamespace and MaxMutationsPerNamespace bound what one namespace's
	// Customizations may ask of the server (customization.Limits).
	MaxCustomizationsPerNamespace int
	MaxMutationsPerNamespace      int
	WatcherBufferSize             int
	BookmarkInterval              time.Duration
	// DeletionEventDelay is --deletion-event-delay: how long a location may hold an object it
	// is to delete its copy of before an Event on the object names it (pkg/locationevents).
	DeletionEventDelay time.Duration
	DiscoveryInterval  time.Duration
	FreshnessTimeout   time.Duration
	// ConsistentReadWait bounds the wait of a consistent read for the cache to prove freshness.
	ConsistentReadWait time.Duration
	// MinRequestTimeout is kube-apiserver's --min-request-timeout (seconds) for view watches,
	// which are also capped by it (view.Options.MinRequestTimeout). The default, 300, is
	// client-go's own reflector watch timeout (5 to 10 minutes), so informers reconnect no more
	// often than they do anyway, and a revoked permission ends open watches within 10 minutes.
	MinRequestTimeout int
	// MaxWatchesPerUser bounds one user's concurrent watches on one location's view.
	MaxWatchesPerUser int
	// RestartFenceTimeout bounds the wait, before the first lists of the source, for the
	// source's resourceVersion to move past the one read at start-up (cache.Config.FenceTimeout).
	RestartFenceTimeout time.Duration
	// MaxRenderingBytes bounds the size of a rendering (Customizations and spec-diff patches)
	// in bytes of JSON; a larger one is refused (rendercheck.TooLarge).
	MaxRenderingBytes int64
	// LocationAccess is the location-access mode (locationbinding.ModeBound or ModeOpen;
	// docs/tenancy.md): in Bound a view shows an object only when a LocationBinding binds its
	// namespace to the location.
	LocationAccess string
}

// Defaults of the event history's memory bounds (docs/views.md, "Event history").
const (
	// DefaultHistoryMemory is --watch-history-memory: 256 MiB for the histories of all
	// resources together. At the benchmark's ConfigMaps (1.9 KiB of JSON, 2.5 KiB as the
	// history counts a superseded version) that is about 100,000 superseded versions, ten
	// times what the count bound (--watch-history-size) keeps of one resource, while a writer
	// of large objects can no longer grow a replica's memory without bound (150 writes of a
	// 900 KB ConfigMap used to keep 225 MB).
	DefaultHistoryMemory = 256 << 20
	// DefaultHistoryMaxObjectSize is --watch-history-max-object-size: 256 KiB of JSON, a
	// hundred times a typical object and a sixth of etcd's largest value (1.5 MiB). A version
	// larger than that is kept only while it is the current one.
	DefaultHistoryMaxObjectSize = 256 << 10
)

// NewOptions returns the default options. There is no etcd (the server stores nothing) and no
// admission (views are read-only).
func NewOptions() *Options {
	o := &Options{
		RecommendedOptions:            genericoptions.NewRecommendedOptions("", Codecs.LegacyCodec(v1alpha1.SchemeGroupVersion)),
		SourceQPS:                     200,
		SourceBurst:                   400,
		Clusters:                      sourcecluster.NewOptions(),
		HistorySize:                   10000,
		HistoryAge:                    cache.DefaultHistoryMaxAge,
		HistoryMemory:                 DefaultHistoryMemory,
		HistoryMaxObjectSize:          DefaultHistoryMaxObjectSize,
		RenderWorkers:                 cache.DefaultRenderWorkers,
		RenderCostPerObject:           cache.DefaultRenderCostPerObject,
		RenderCostPerSecond:           cache.DefaultRenderCostPerSecond,
		MaxCustomizationsPerNamespace: customization.DefaultMaxCustomizationsPerNamespace,
		MaxMutationsPerNamespace:      customization.DefaultMaxMutationsPerNamespace,
		WatcherBufferSize:             1000,
		BookmarkInterval:              time.Minute,
		DeletionEventDelay:            5 * time.Second,
		DiscoveryInterval:             5 * time.Second,
		FreshnessTimeout:              3 * time.Second,
		ConsistentReadWait:            50 * time.Millisecond,
		MinRequestTimeout:             300,
		MaxWatchesPerUser:             100,
		MaxRenderingBytes:             rendercheck.DefaultMaxBytes,
		LocationAccess:                string(locationbinding.ModeBound),
		// kube-apiserver renews its identity Lease every 10 seconds.
		RestartFenceTimeout: 30 * time.Second,
	}
	o.RecommendedOptions.Etcd = nil
	o.RecommendedOptions.Admission = nil
	return o
}

// AddFlags registers the options' flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.RecommendedOptions.AddFlags(fs)
	fs.StringVar(&o.SourceKubeconfig, "source-kubeconfig", o.SourceKubeconfig, "Kubeconfig of the source API server whose objects are mirrored. Empty: $KUBECONFIG, ~/.kube/config, then in-cluster, as client-go does.")
	fs.Float32Var(&o.SourceQPS, "source-qps", o.SourceQPS, "Queries per second of the server's own requests to the source.")
	fs.IntVar(&o.SourceBurst, "source-burst", o.SourceBurst, "Burst of the server's own requests to the source.")
	fs.StringSliceVar(&o.Resources, "resources", o.Resources, "Mirrored resources as resource.group (e.g. configmaps,deployments.apps,widgets.example.com). Empty: every namespaced resource the source serves with list and watch, minus events and leases.")
	o.Clusters.AddFlags(fs)
	fs.IntVar(&o.HistorySize, "watch-history-size", o.HistorySize, "Events kept per resource so watches can resume from a resourceVersion; older ones answer 410 Gone.")
	fs.DurationVar(&o.HistoryAge, "watch-history-age", o.HistoryAge, "How long an event is kept so watches can resume from its resourceVersion, at most (kube-apiserver's watch cache keeps about 75s); older resumes answer 410 Gone.")
	fs.Int64Var(&o.HistoryMemory, "watch-history-memory", o.HistoryMemory, "Bytes of memory the event histories of all resources may keep alive together (superseded object versions, estimated); past it, the resources that hold more than their share drop their oldest events. 0: no bound.")
	fs.IntVar(&o.HistoryMaxObjectSize, "watch-history-max-object-size", o.HistoryMaxObjectSize, "Bytes of JSON above which a superseded object version is not kept in the event history; a resume that needs it answers 410 Gone. 0: keep every version.")
	fs.IntVar(&o.RenderWorkers, "render-workers", o.RenderWorkers, "Renderings by Customizations made at once; one namespace has one at most, so that its slow Customizations never hold another's.")
	fs.Int64Var(&o.RenderCostPerObject, "render-cost-per-object", o.RenderCostPerObject, "CEL cost units the renderings of one object version (every location and Customization) may spend; past it the Customization is not applied to it (the view keeps its last rendering) and is marked Degraded.")
	fs.Int64Var(&o.RenderCostPerSecond, "render-cost-per-second", o.RenderCostPerSecond, "CEL cost units per second the renderings of one namespace may spend on average; a namespace that spent more waits (its Customizations report Degraded, reason Throttled).")
	fs.IntVar(&o.MaxCustomizationsPerNamespace, "max-customizations-per-namespace", o.MaxCustomizationsPerNamespace, "Customizations of one namespace applied at most, the oldest first; the others select objects that then fail to render (views keep their last rendering) and are marked Degraded. 0: no limit.")
	fs.IntVar(&o.MaxMutationsPerNamespace, "max-mutations-per-namespace", o.MaxMutationsPerNamespace, "Mutations of one namespace's Customizations applied at most, counted the oldest Customization first; a Customization whose mutations go past it is treated as over --max-customizations-per-namespace. 0: no limit.")
	fs.IntVar(&o.WatcherBufferSize, "watcher-buffer-size", o.WatcherBufferSize, "Events a watcher may fall behind before it is closed (its client re-watches).")
	fs.DurationVar(&o.DeletionEventDelay, "deletion-event-delay", o.DeletionEventDelay, "How long a location may take to delete its copy of an object that waits for it (its finalizer locations.mapper.kcp.io/<location>) before an Event on the object names the location (one per object and location).")
	fs.DurationVar(&o.BookmarkInterval, "bookmark-interval", o.BookmarkInterval, "How often watchers that allow bookmarks get one, when the resource moved on since their last event (kube-apiserver sends them about once a minute).")
	fs.DurationVar(&o.DiscoveryInterval, "source-discovery-interval", o.DiscoveryInterval, "How often the source's discovery is re-read to pick up added and removed resources (CRDs).")
	fs.DurationVar(&o.FreshnessTimeout, "freshness-timeout", o.FreshnessTimeout, "How long a read waits for the cache to reach a resourceVersion before answering 504.")
	fs.IntVar(&o.MinRequestTimeout, "min-request-timeout", o.MinRequestTimeout, "Seconds a view watch stays open at least: each watch ends after a random time in [t, 2t) (as kube-apiserver's flag), and a client's larger timeoutSeconds is reduced to it, so a revoked permission ends every open watch within 2t (docs/install.md).")
	fs.IntVar(&o.MaxWatchesPerUser, "max-watches-per-user", o.MaxWatchesPerUser, "Concurrent watches one user may hold on one location's view; more are answered 429. 0: no limit.")
	fs.DurationVar(&o.RestartFenceTimeout, "restart-fence-timeout", o.RestartFenceTimeout, "How long the server waits at start-up, before it lists the source, for the source's resourceVersion to move past the one it read first, so that it never shows an object at a resourceVersion a previous run (or a crashed one) showed with other content (docs/views.md, \"Restarts and replicas\"). 0: no wait.")
	fs.Int64Var(&o.MaxRenderingBytes, "max-rendering-bytes", o.MaxRenderingBytes, "The largest rendering of an object for a location (its Customizations and spec-diff.kcp.io/<location> patch), in bytes of JSON, checked after each mutation: a larger one is refused, reported in the Customization's status and the logs, and the view keeps the last rendering or withholds the object (503). The default is kube-apiserver's request body limit (docs/customization.md).")
	fs.StringVar(&o.LocationAccess, "location-access", o.LocationAccess, "Which locations may see an object: \"Bound\" (a location's view shows an object only when a LocationBinding of the object's namespace, kcp: of its logical cluster and namespace, binds the location; cluster-scoped objects are bound by the LocationBindings of cluster-mapper-system) or \"Open\" (every location an object is assigned to, whoever wrote the assignment: for a source with a single tenant). See docs/tenancy.md.")
	fs.DurationVar(&o.ConsistentReadWait, "consistent-read-wait", o.ConsistentReadWait, "How long a read with resourceVersion \"\" waits for the cache to prove it reached the source's current resourceVersion before it is served at the cache's own (docs/views.md).")
}

// Complete fills in what the flags left open: a self-signed serving certificate when none is
// given (for local runs and tests).
func (o *Options) Complete() error {
	return o.RecommendedOptions.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.ParseIP("127.0.0.1")})
}

// Validate reports every invalid option.
func (o *Options) Validate() error {
	var errs []string
	for _, err := range o.RecommendedOptions.Validate() {
		errs = append(errs, err.Error())
	}
	if _, err := ParseResources(o.Resources); err != nil {
		errs = append(errs, err.Error())
	}
	if err := o.Clusters.Validate(); err != nil {
		errs = append(errs, err.Error())
	}
	if _, err := locationbinding.ParseMode(o.LocationAccess); err != nil {
		errs = append(errs, "--location-access: "+err.Error())
	}
	if o.HistorySize < 1 {
		errs = append(errs, "--watch-history-size must be at least 1")
	}
	if o.HistoryAge < 0 || o.HistoryMemory < 0 || o.HistoryMaxObjectSize < 0 {
		errs = append(errs, "--watch-history-age, --watch-history-memory and --watch-history-max-object-size must not be negative")
	}
	if o.RenderWorkers < 1 || o.RenderCostPerObject < 1 || o.RenderCostPerSecond < 1 {
		errs = append(errs, "--render-workers, --render-cost-per-object and --render-cost-per-second must be at least 1")
	}
	if o.MaxCustomizationsPerNamespace < 0 || o.MaxMutationsPerNamespace < 0 {
		errs = append(errs, "--max-customizations-per-namespace and --max-mutations-per-namespace must not be negative")
	}
	if o.WatcherBufferSize < 1 {
		errs = append(errs, "--watcher-buffer-size must be at least 1")
	}
	if o.MinRequestTimeout < 1 {
		errs = append(errs, "--min-request-timeout must be at least 1 (second)")
	}
	if o.MaxRenderingBytes < 1024 {
		errs = append(errs, "--max-rendering-bytes must be at least 1024")
	}
	if o.MaxWatchesPerUser < 0 {
		errs = append(errs, "--max-watches-per-user must not be negative")
	}
	if o.RestartFenceTimeout < 0 {
		errs = append(errs, "--restart-fence-timeout must not be negative")
	}
	if o.BookmarkInterval <= 0 || o.DeletionEventDelay <= 0 || o.DiscoveryInterval <= 0 || o.FreshnessTimeout <= 0 || o.ConsistentReadWait <= 0 {
		errs = append(errs, "--bookmark-interval, --deletion-event-delay, --source-discovery-interval, --freshness-timeout and --consistent-read-wait must be positive")
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid options: %s", strings.Join(errs, "; "))
	}
	return nil
}

// ParseResources parses "resource.group" names ("configmaps", "deployments.apps").
// It returns an error naming the first entry that is empty.
func ParseResources(names []string) ([]schema.GroupResource, error) {
	var out []schema.GroupResource
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			return nil, fmt.Errorf("--resources has an empty entry")
		}
		out = append(out, schema.ParseGroupResource(n))
	}
	return out, nil
}

// Config builds the server configuration from the options: the generic config (with OpenAPI,
// the long-running check for view watches) and the source cache.
func (o *Options) Config() (*Config, error) {
	sourceConfig, err := o.sourceRESTConfig()
	if err != nil {
		return nil, err
	}
	serverConfig := genericapiserver.NewRecommendedConfig(Codecs)
	serverConfig.EffectiveVersion = utilcompatibility.DefaultBuildEffectiveVersion()
	serverConfig.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(generatedopenapi.GetOpenAPIDefinitions, openapi.NewDefinitionNamer(Scheme))
	serverConfig.OpenAPIConfig.Info.Title = "mapper-apiserver"
	serverConfig.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(generatedopenapi.GetOpenAPIDefinitions, openapi.NewDefinitionNamer(Scheme))
	serverConfig.OpenAPIV3Config.Info.Title = "mapper-apiserver"
	serverConfig.LongRunningFunc = longRunning
	serverConfig.MinRequestTimeout = o.MinRequestTimeout
	if err := o.RecommendedOptions.ApplyTo(serverConfig); err != nil {
		return nil, err
	}
	// Per-location authorization of views on top of the delegated authorizer (docs/design.md).
	locationauthorizer.Install(&serverConfig.Config)
	// Outside every filter: the long-running check, the authorizer and the view share one parse
	// of a view request.
	build := serverConfig.BuildHandlerChainFunc
	serverConfig.BuildHandlerChainFunc = func(apiHandler http.Handler, c *genericapiserver.Config) http.Handler {
		return contract.WithInnerRequestMemo(build(apiHandler, c))
	}

	resources, _ := ParseResources(o.Resources)
	dyn, err := dynamic.NewForConfig(sourceConfig)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(sourceConfig)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(sourceConfig)
	if err != nil {
		return nil, err
	}
	store := cache.StoreOptions{DefaultCluster: o.Clusters.ClusterName}
	var clusterDynamic func(string) (dynamic.Interface, error)
	if o.Clusters.KCP() {
		if clusterDynamic, err = o.Clusters.Writers(sourceConfig); err != nil {
			return nil, err
		}
		store = cache.StoreOptions{ClusterFromAnnotation: true}
	}
	// On a plain source, every object the cache stores carries kcp.io/cluster (docs/design.md,
	// "Names"): the object client writes it into the bytes it reads.
	var add source.Annotation
	if !o.Clusters.KCP() {
		add = source.Annotation{Key: contract.ClusterAnnotation, Value: o.Clusters.ClusterName}
	}
	objects, err := source.NewObjectClient(sourceConfig, nil, add)
	if err != nil {
		return nil, err
	}
	src, err := source.New(source.Config{Dynamic: dyn, Discovery: disc, ClusterDynamic: clusterDynamic, Objects: objects})
	if err != nil {
		return nil, err
	}
	writeClient := func(string) (dynamic.Interface, error) { return dyn, nil }
	if clusterDynamic != nil {
		writeClient = clusterDynamic
	}
	// c is set below; the recorder asks it only once the cache runs.
	var c *cache.Cache
	pending := locationevents.New(locationevents.Config{
		Client:   writeClient,
		Still:    func(p cache.PendingDeletion) bool { return stillPending(c, p) },
		Kind:     func(gvr schema.GroupVersionResource) (string, string) { return kindOf(c, gvr) },
		Delay:    o.DeletionEventDelay,
		Instance: serverIdentity(),
	})
	renderer := cache.NewRenderer(cache.RendererOptions{
		Workers: o.RenderWorkers, CostPerObject: o.RenderCostPerObject, CostPerSecond: o.RenderCostPerSecond})
	historyAge := o.HistoryAge
	if historyAge == 0 {
		historyAge = -1 // no age bound
	}
	c, err = cache.New(cache.Config{
		Source:    src,
		Resources: resources,
		Store: cache.StoreOptions{
			DefaultCluster:        store.DefaultCluster,
			ClusterFromAnnotation: store.ClusterFromAnnotation,
			HistorySize:           o.HistorySize,
			HistoryMaxAge:         historyAge,
			HistoryBudget:         cache.NewHistoryBudget(o.HistoryMemory),
			HistoryMaxObjectSize:  o.HistoryMaxObjectSize,
			Renderer:              renderer,
			WatcherBufferSize:     o.WatcherBufferSize,
			BookmarkInterval:      o.BookmarkInterval,
			DeletionPending:       pending.Pending,
			MaxRenderingBytes:     o.MaxRenderingBytes,
		},
		DiscoveryInterval: o.DiscoveryInterval,
		WaitForRules:      true,
		FenceTimeout:      o.RestartFenceTimeout,
	})
	if err != nil {
		return nil, err
	}
	access, _ := locationbinding.ParseMode(o.LocationAccess)
	rules := customization.NewFollower(dyn, customization.FollowerOptions{
		Options: customization.Options{PlainCluster: o.Clusters.PlainCluster(), MaxRenderingBytes: o.MaxRenderingBytes, Limits: customization.Limits{
			CustomizationsPerNamespace: o.MaxCustomizationsPerNamespace, MutationsPerNamespace: o.MaxMutationsPerNamespace}},
		OpenAPI: disc.OpenAPIV3(),
		Access:  access,
	})
	rules.OnChange(func(s *customization.Snapshot) { c.SetRules(s) })
	return &Config{
		GenericConfig: serverConfig,
		ExtraConfig: ExtraConfig{
			Source:         src,
			Cache:          c,
			Registrations:  location.NewRegistrations(kube, dyn, LeaseNamespace),
			LocationEvents: pending,
			Rules:          rules,
			RenderEvents:   customization.NewEventWriter(renderRefusals(c), writeClient, customizationStatusInterval),
			View: view.Options{
				PlainCluster:       o.Clusters.PlainCluster(),
				FreshnessTimeout:   o.FreshnessTimeout,
				ConsistentReadWait: o.ConsistentReadWait,
				MinRequestTimeout:  time.Duration(o.MinRequestTimeout) * time.Second,
				MaxWatchesPerUser:  o.MaxWatchesPerUser,
				OutcomeRecorded:    pending.Recorded,
			},
		},
	}, nil
}

// Run builds and runs the server until ctx ends.
func (o *Options) Run(ctx context.Context) error {
	cfg, err := o.Config()
	if err != nil {
		return err
	}
	server, err := cfg.Complete().New()
	if err != nil {
		return err
	}
	return server.Run(ctx)
}

func (o *Options) sourceRESTConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.SourceKubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("cannot load the source kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = o.SourceQPS, o.SourceBurst
	cfg.UserAgent = "mapper-apiserver/source-cache"
	// A status write's source warnings (unknown fields) are its answer's (source.RelayWarnings).
	cfg.WarningHandlerWithContext = source.WarningHandler{}
	return cfg, nil
}

// baseLongRunning is kube-apiserver's own check: watches are long-running.
var baseLongRunning = genericfilters.BasicLongRunningRequestCheck(sets.NewString("watch"), sets.NewString())

// longRunning decides whether a request is long-running from the request that is served: for a
// request inside a location view that is the inner request (contract.ParseViewRequest), never
// the outer one. The outer request is always a "get" of locations/proxy, whatever the inner
// request is (kube-apiserver, whose check lists "proxy" among its long-running subresources,
// treats every view request as long-running); here only a real watch inside a view is (watch=true, watch=1, or the
// legacy /watch/ path, as kube-apiserver parses them), so that gets, lists and status writes
// stay under priority-and-fairness, the in-flight limits and the request timeout.
func longRunning(r *http.Request, ri *request.RequestInfo) bool {
	if _, inner, ok, err := contract.ParseViewRequest(r, ri); ok {
		return err == nil && inner.Info.Verb == "watch"
	}
	return baseLongRunning(r, ri)
}
