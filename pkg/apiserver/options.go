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
	"github.com/cluster-mapper/cluster-mapper/pkg/deletionevents"
	generatedopenapi "github.com/cluster-mapper/cluster-mapper/pkg/generated/openapi"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
	"github.com/cluster-mapper/cluster-mapper/pkg/registry/location"
	"github.com/cluster-mapper/cluster-mapper/pkg/registry/view"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
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
	// SourceMode is SourceModePlain (default) or SourceModeKCP.
	SourceMode string
	// ClusterName is the logical cluster of every object of a plain source (a plain
	// Kubernetes source is one logical cluster; a kcp.io/cluster annotation a user wrote is
	// ignored). Unused in kcp mode.
	ClusterName string
	// SourceClusterPath is, in kcp mode, the path of one logical cluster on the source's
	// server (the kubeconfig's server with a trailing /clusters/* removed); ClusterPlaceholder
	// is replaced by the cluster. Reads by name and writes (status write-back, status records)
	// go there.
	SourceClusterPath string

	HistorySize       int
	WatcherBufferSize int
	BookmarkInterval  time.Duration
	// DeletionEventDelay is --deletion-event-delay: how long a location may hold an object it
	// is to delete its copy of before an Event on the object names it (pkg/deletionevents).
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
	// LocationAccess is the location-access mode (locationbinding.ModeBound or ModeOpen;
	// docs/tenancy.md): in Bound a view shows an object only when a LocationBinding binds its
	// namespace to the location.
	LocationAccess string
}

// NewOptions returns the default options. There is no etcd (the server stores nothing) and no
// admission (views are read-only).
func NewOptions() *Options {
	o := &Options{
		RecommendedOptions: genericoptions.NewRecommendedOptions("", Codecs.LegacyCodec(v1alpha1.SchemeGroupVersion)),
		SourceQPS:          200,
		SourceBurst:        400,
		SourceMode:         SourceModePlain,
		ClusterName:        "default",
		SourceClusterPath:  source.DefaultClusterPath,
		HistorySize:        10000,
		WatcherBufferSize:  1000,
		BookmarkInterval:   time.Minute,
		DeletionEventDelay: 5 * time.Second,
		DiscoveryInterval:  5 * time.Second,
		FreshnessTimeout:   3 * time.Second,
		ConsistentReadWait: 50 * time.Millisecond,
		MinRequestTimeout:  300,
		MaxWatchesPerUser:  100,
		LocationAccess:     string(locationbinding.ModeBound),
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
	fs.StringVar(&o.SourceMode, "source-mode", o.SourceMode, "How logical clusters are found: \"plain\" (a Kubernetes source, one logical cluster named by --cluster-name; a kcp.io/cluster annotation on an object is ignored) or \"kcp\" (the source kubeconfig points at kcp's wildcard endpoint .../clusters/*; each object's cluster is its kcp.io/cluster annotation, and objects without a valid one are not served).")
	fs.StringVar(&o.ClusterName, "cluster-name", o.ClusterName, "With --source-mode=plain: the logical cluster name of every source object (views show it in kcp.io/cluster).")
	fs.StringVar(&o.SourceClusterPath, "source-cluster-path", o.SourceClusterPath, "With --source-mode=kcp: the path of one logical cluster on the source's server (the kubeconfig's server with a trailing /clusters/* removed); "+source.ClusterPlaceholder+" is replaced by the cluster. Reads by name and status writes go there.")
	fs.IntVar(&o.HistorySize, "watch-history-size", o.HistorySize, "Events kept per resource so watches can resume from a resourceVersion; older ones answer 410 Gone.")
	fs.IntVar(&o.WatcherBufferSize, "watcher-buffer-size", o.WatcherBufferSize, "Events a watcher may fall behind before it is closed (its client re-watches).")
	fs.DurationVar(&o.DeletionEventDelay, "deletion-event-delay", o.DeletionEventDelay, "How long a location may take to delete its copy of an object that waits for it (its finalizer locations.mapper.kcp.io/<location>) before an Event on the object names the location (one per object and location).")
	fs.DurationVar(&o.BookmarkInterval, "bookmark-interval", o.BookmarkInterval, "How often watchers that allow bookmarks get one, when the resource moved on since their last event (kube-apiserver sends them about once a minute).")
	fs.DurationVar(&o.DiscoveryInterval, "source-discovery-interval", o.DiscoveryInterval, "How often the source's discovery is re-read to pick up added and removed resources (CRDs).")
	fs.DurationVar(&o.FreshnessTimeout, "freshness-timeout", o.FreshnessTimeout, "How long a read waits for the cache to reach a resourceVersion before answering 504.")
	fs.IntVar(&o.MinRequestTimeout, "min-request-timeout", o.MinRequestTimeout, "Seconds a view watch stays open at least: each watch ends after a random time in [t, 2t) (as kube-apiserver's flag), and a client's larger timeoutSeconds is reduced to it, so a revoked permission ends every open watch within 2t (docs/install.md).")
	fs.IntVar(&o.MaxWatchesPerUser, "max-watches-per-user", o.MaxWatchesPerUser, "Concurrent watches one user may hold on one location's view; more are answered 429. 0: no limit.")
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
	switch o.SourceMode {
	case SourceModePlain:
		if err := contract.ValidateClusterName(o.ClusterName); err != nil {
			errs = append(errs, "--cluster-name: "+err.Error())
		}
	case SourceModeKCP:
		if !strings.Contains(o.SourceClusterPath, source.ClusterPlaceholder) || !strings.HasPrefix(o.SourceClusterPath, "/") {
			errs = append(errs, fmt.Sprintf("--source-cluster-path %q must start with / and contain %s", o.SourceClusterPath, source.ClusterPlaceholder))
		}
	default:
		errs = append(errs, fmt.Sprintf("--source-mode %q is not %q or %q", o.SourceMode, SourceModePlain, SourceModeKCP))
	}
	if _, err := locationbinding.ParseMode(o.LocationAccess); err != nil {
		errs = append(errs, "--location-access: "+err.Error())
	}
	if o.HistorySize < 1 {
		errs = append(errs, "--watch-history-size must be at least 1")
	}
	if o.WatcherBufferSize < 1 {
		errs = append(errs, "--watcher-buffer-size must be at least 1")
	}
	if o.MinRequestTimeout < 1 {
		errs = append(errs, "--min-request-timeout must be at least 1 (second)")
	}
	if o.MaxWatchesPerUser < 0 {
		errs = append(errs, "--max-watches-per-user must not be negative")
	}
	if o.BookmarkInterval <= 0 || o.DeletionEventDelay <= 0 || o.DiscoveryInterval <= 0 || o.FreshnessTimeout <= 0 || o.ConsistentReadWait <= 0 {
		errs = append(errs, "--bookmark-interval, --source-discovery-interval, --freshness-timeout and --consistent-read-wait must be positive")
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
	// Per-location authorization of views on top of the delegated authorizer (DESIGN.md).
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
	store := cache.StoreOptions{DefaultCluster: o.ClusterName}
	viewOpts := view.Options{PlainCluster: o.ClusterName}
	var clusterDynamic func(string) (dynamic.Interface, error)
	if o.SourceMode == SourceModeKCP {
		clients, err := source.NewClusterClients(sourceConfig, o.SourceClusterPath)
		if err != nil {
			return nil, err
		}
		clusterDynamic = clients.For
		store = cache.StoreOptions{ClusterFromAnnotation: true}
		viewOpts.PlainCluster = ""
	}
	// On a plain source, every object the cache stores carries kcp.io/cluster (DESIGN.md,
	// "Names"): the object client writes it into the bytes it reads.
	var add source.Annotation
	if o.SourceMode != SourceModeKCP {
		add = source.Annotation{Key: contract.ClusterAnnotation, Value: o.ClusterName}
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
	pending := deletionevents.New(deletionevents.Config{
		Client:   writeClient,
		Still:    func(p cache.PendingDeletion) bool { return stillPending(c, p) },
		Kind:     func(gvr schema.GroupVersionResource) (string, string) { return kindOf(c, gvr) },
		Delay:    o.DeletionEventDelay,
		Instance: serverIdentity(),
	})
	c, err = cache.New(cache.Config{
		Source:    src,
		Resources: resources,
		Store: cache.StoreOptions{
			DefaultCluster:        store.DefaultCluster,
			ClusterFromAnnotation: store.ClusterFromAnnotation,
			HistorySize:           o.HistorySize,
			WatcherBufferSize:     o.WatcherBufferSize,
			BookmarkInterval:      o.BookmarkInterval,
			DeletionPending:       pending.Pending,
		},
		DiscoveryInterval: o.DiscoveryInterval,
		WaitForRules:      true,
	})
	if err != nil {
		return nil, err
	}
	access, _ := locationbinding.ParseMode(o.LocationAccess)
	rules := customization.NewFollower(dyn, customization.FollowerOptions{
		Options: customization.Options{PlainCluster: viewOpts.PlainCluster},
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
			DeletionEvents: pending,
			Rules:          rules,
			RulesStatus:    customization.NewStatusWriter(rules, customizationFailures(c), writeClient, customizationStatusInterval),
			View: view.Options{
				PlainCluster:       viewOpts.PlainCluster,
				FreshnessTimeout:   o.FreshnessTimeout,
				ConsistentReadWait: o.ConsistentReadWait,
				MinRequestTimeout:  time.Duration(o.MinRequestTimeout) * time.Second,
				MaxWatchesPerUser:  o.MaxWatchesPerUser,
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
