// Package app is the command line of the mapper (cmd/mapper): flags, the run command with
// leader election and the health/metrics endpoint, and the verify subcommand.
package app

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
)

// ConnectionOptions are the flags `mapper` and `mapper verify` share: where the view and the
// target are, and the rules that decide where an object goes.
type ConnectionOptions struct {
	// ViewKubeconfig is the kubeconfig whose server is the location's view URL; required.
	ViewKubeconfig string
	// TargetKubeconfig is the target cluster's kubeconfig; empty means $KUBECONFIG,
	// ~/.kube/config, then in-cluster, as client-go does.
	TargetKubeconfig string
	// Location must match the view URL's location; empty takes it from the URL.
	Location string
	// Resources restricts the mapped resources ("resource.group"); empty maps everything the
	// view serves.
	Resources []string
	// NamespaceMapping is "auto" (the default), "same" or "prefixed".
	NamespaceMapping string
	// ClusterName is the logical cluster of objects without the kcp.io/cluster annotation.
	ClusterName string
	// FieldManager is the server-side apply field manager on the target.
	FieldManager string
	// TargetQPS and TargetBurst limit requests to the target; the same limits apply to the
	// mapper's own requests to the view (status writes, confirming reads). A negative TargetQPS
	// (the default) turns client-side rate limiting off: API servers since Kubernetes 1.20
	// protect themselves with API Priority and Fairness (KEP-1040), and SIG API Machinery and
	// controller-runtime (v0.21 and later) disable the client-side limiter for that reason. A
	// positive value brings back client-go's token bucket.
	TargetQPS   float32
	TargetBurst int
	// Shard is --shard: "<index>/<count>" makes the mapper one of count mappers sharing the
	// location, owning hash shard index (contract.ParseShard); empty owns the whole location
	// (or the part the view URL names).
	Shard string
}

// NewConnectionOptions returns the defaults.
func NewConnectionOptions() *ConnectionOptions {
	return &ConnectionOptions{
		NamespaceMapping: string(mapper.NamespaceMappingAuto),
		ClusterName:      mapper.DefaultClusterName,
		FieldManager:     mapper.DefaultFieldManager,
		TargetQPS:        -1,
		TargetBurst:      100,
	}
}

// AddFlags registers the flags.
func (o *ConnectionOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ViewKubeconfig, "view-kubeconfig", o.ViewKubeconfig, "Kubeconfig whose server is the location's view: https://<mapper-apiserver or kube-apiserver>/apis/mapper.kcp.io/v1alpha1/locations/<location>/proxy. Required.")
	fs.StringVar(&o.TargetKubeconfig, "target-kubeconfig", o.TargetKubeconfig, "Kubeconfig of the target cluster. Empty: $KUBECONFIG, ~/.kube/config, then in-cluster.")
	fs.StringVar(&o.Location, "location", o.Location, "The location to map. Must match the view URL; empty takes it from the URL.")
	fs.StringSliceVar(&o.Resources, "resources", o.Resources, "Resources to map as resource.group (e.g. configmaps,deployments.apps,widgets.example.com). Empty: every resource the view serves, following its discovery.")
	fs.StringVar(&o.NamespaceMapping, "namespace-mapping", o.NamespaceMapping, "Target namespace of a source namespace: 'same' (the same name; for a single source cluster), 'prefixed' (<cluster>-<namespace>, shortened with a stable hash to at most 63 characters; the original is kept in annotations of the target namespace), or 'auto': resolved once at start to the mapping that placed the copies already on the target, else to 'prefixed' when the view holds objects of more than one logical cluster and 'same' otherwise (see docs/mapper.md).")
	fs.StringVar(&o.ClusterName, "cluster-name", o.ClusterName, "Logical cluster of source objects without the kcp.io/cluster annotation (as mapper-apiserver's --cluster-name).")
	fs.StringVar(&o.FieldManager, "field-manager", o.FieldManager, "Server-side apply field manager on the target. Changing it makes the old manager's fields foreign: they are left alone.")
	fs.Float32Var(&o.TargetQPS, "target-qps", o.TargetQPS, "Queries per second to the target (and of the mapper's own requests to the view). Negative (the default): no client-side limit; the API servers' priority and fairness protects them.")
	fs.StringVar(&o.Shard, "shard", o.Shard, "Own one hash shard of the location, as <index>/<count> (e.g. 0/4): the objects whose source cluster and namespace hash to index (docs/mapper.md, \"Shards\"). count mappers with the same count and the indexes 0..count-1 share the location and its target; each lists, watches, applies, sweeps and deletes only inside its shard, and has its own leader election Lease and heartbeat Lease. Needs an explicit --namespace-mapping. Empty: the whole location, or the part of it the view URL names (.../proxy/clusters/<cluster>).")
	fs.IntVar(&o.TargetBurst, "target-burst", o.TargetBurst, "Burst of requests to the target (and of the mapper's own requests to the view); used only with a positive --target-qps.")
}

// LocationFromViewURL returns the location named by a view's base URL (or the URL of a part
// of the view), or an error when the URL is not a location view URL.
func LocationFromViewURL(server string) (string, error) {
	_, p, err := splitViewURL(server)
	return p.Location, err
}

// splitViewURL parses server, the URL of a location's view or of a part of it
// (<view>/clusters/<c>, <view>/shards/<i>-of-<n>; contract.ParseViewPath), and returns the
// URL of the whole location's view (the part's path removed) and the parsed path.
func splitViewURL(server string) (string, contract.ViewURLPath, error) {
	u, err := url.Parse(server)
	if err != nil {
		return "", contract.ViewURLPath{}, fmt.Errorf("the view server %q is not a URL: %w", server, err)
	}
	p, ok := contract.ParseViewPath(u.Path)
	if !ok {
		return "", contract.ViewURLPath{}, fmt.Errorf("the view server %q is not a location view URL (https://<host>%s, optionally followed by /clusters/<cluster> or /shards/<index>-of-<count>)", server, contract.ViewPath("<location>", ""))
	}
	u.Path = p.Prefix + contract.ViewPath(p.Location, "")
	u.RawPath = ""
	return u.String(), p, nil
}

// Clients are the resolved connection settings.
type Clients struct {
	// Location is the location of the view URL (checked against --location).
	Location string
	// View and Target are the client configs of the view and the target, with the QPS,
	// burst and user agent of the options.
	View, Target *rest.Config
	// Resources are the parsed --resources.
	Resources []schema.GroupResource
	// NamespaceMapping is the parsed --namespace-mapping.
	NamespaceMapping mapper.NamespaceMapping
	// Part is the part of the location the mapper owns: the part the view URL names, within
	// the hash shard of --shard (mapper.Config.Part). View's Host is then the whole location's
	// view URL.
	Part contract.ViewPart
}

// Complete validates the options, loads both kubeconfigs and checks the location against the
// view URL. It returns every problem it finds.
func (o *ConnectionOptions) Complete(userAgent string) (*Clients, error) {
	mapping, resources, errs := o.parse()
	if o.ViewKubeconfig == "" {
		errs = append(errs, "--view-kubeconfig is required")
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid options: %s", strings.Join(errs, "; "))
	}

	view, err := clientcmd.BuildConfigFromFlags("", o.ViewKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading --view-kubeconfig: %w", err)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.TargetKubeconfig
	target, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the target kubeconfig: %w", err)
	}
	return o.clients(userAgent, view, target, mapping, resources)
}

// ClientsFor is Complete for a caller that has the view's and the target's client configs
// in memory rather than in kubeconfig files (mapper-controller's push mode): it validates
// the options the same way, checks the location against view's Host, and returns copies of
// view and target with the options' QPS, burst and userAgent. It returns every problem it
// finds.
func (o *ConnectionOptions) ClientsFor(userAgent string, view, target *rest.Config) (*Clients, error) {
	mapping, resources, errs := o.parse()
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid options: %s", strings.Join(errs, "; "))
	}
	return o.clients(userAgent, rest.CopyConfig(view), rest.CopyConfig(target), mapping, resources)
}

// Validate returns an error naming every invalid option that needs no kubeconfig (Complete
// and ClientsFor check these too).
func (o *ConnectionOptions) Validate() error {
	if _, _, errs := o.parse(); len(errs) > 0 {
		return fmt.Errorf("invalid options: %s", strings.Join(errs, "; "))
	}
	return nil
}

// parse checks and parses the options that need no kubeconfig; errs names each problem.
func (o *ConnectionOptions) parse() (mapping mapper.NamespaceMapping, resources []schema.GroupResource, errs []string) {
	mapping, err := mapper.ParseNamespaceMapping(o.NamespaceMapping)
	if err != nil {
		errs = append(errs, "--namespace-mapping: "+err.Error())
	}
	if o.ClusterName == "" {
		errs = append(errs, "--cluster-name must not be empty")
	}
	if o.FieldManager == "" {
		errs = append(errs, "--field-manager must not be empty")
	}
	if o.Shard != "" {
		if _, err := contract.ParseShard(o.Shard); err != nil {
			errs = append(errs, "--shard: "+err.Error())
		} else if mapping == mapper.NamespaceMappingAuto {
			// Each shard would resolve auto over its own part: shards that see different
			// numbers of logical clusters would place copies differently on one target.
			errs = append(errs, "--shard needs an explicit --namespace-mapping (same or prefixed): shards resolving auto over their own parts could choose differently")
		}
	}
	for _, r := range o.Resources {
		r = strings.TrimSpace(r)
		if r == "" {
			errs = append(errs, "--resources has an empty entry")
			continue
		}
		resources = append(resources, schema.ParseGroupResource(r))
	}
	return mapping, resources, errs
}

// clients checks the location of the view URL and sets the options' limits on view and
// target (which it modifies).
func (o *ConnectionOptions) clients(userAgent string, view, target *rest.Config, mapping mapper.NamespaceMapping, resources []schema.GroupResource) (*Clients, error) {
	base, vp, err := splitViewURL(view.Host)
	if err != nil {
		return nil, err
	}
	location, part := vp.Location, vp.Part
	if o.Shard != "" {
		shard, _ := contract.ParseShard(o.Shard) // checked by parse
		if !part.Shard.IsZero() && part.Shard != shard {
			return nil, fmt.Errorf("--shard=%s does not match the view URL %s, which names the shard %s", o.Shard, view.Host, part.Shard)
		}
		part.Shard = shard
	}
	view.Host = base
	if o.Location != "" && o.Location != location {
		return nil, fmt.Errorf("--location=%s does not match the view URL %s, which is the view of location %q", o.Location, view.Host, location)
	}
	if msgs := validation.IsDNS1123Label(location); len(msgs) > 0 {
		return nil, fmt.Errorf("location %q is not a DNS-1123 label: %s", location, strings.Join(msgs, "; "))
	}
	for _, c := range []*rest.Config{view, target} {
		c.QPS, c.Burst = o.TargetQPS, o.TargetBurst
		c.UserAgent = userAgent
		c.Timeout = 0
	}
	return &Clients{Location: location, View: view, Target: target, Resources: resources, NamespaceMapping: mapping, Part: part}, nil
}

// RunOptions are the flags of the mapper itself (not of verify). Their meaning is that of the
// mapper.Config fields of the same names.
type RunOptions struct {
	// Workers is --workers.
	Workers int
	// DiscoveryInterval is --discovery-interval.
	DiscoveryInterval time.Duration
	// SweepInterval is --orphan-sweep-interval.
	SweepInterval time.Duration
	// ProgressInterval is --progress-interval.
	ProgressInterval time.Duration
	// RetryMaxDelay is --max-retry-delay.
	RetryMaxDelay time.Duration
	// MetricsBindAddress is --metrics-bind-address: where /metrics, /healthz and /readyz are
	// served ("0": nowhere).
	MetricsBindAddress string
	// Profiling is --profiling: Go's /debug/pprof on MetricsBindAddress too (unauthenticated,
	// so off by default, as mapper-controller's --profiling).
	Profiling bool
	// Finalizers is --location-finalizers: the deletion protocol (mapper.Config.NoFinalizers
	// is its negation); on by default.
	Finalizers bool
}

// NewRunOptions returns the defaults.
func NewRunOptions() *RunOptions {
	return &RunOptions{
		Workers:            mapper.DefaultWorkers,
		DiscoveryInterval:  mapper.DefaultDiscoveryInterval,
		SweepInterval:      mapper.DefaultSweepInterval,
		ProgressInterval:   mapper.DefaultProgressInterval,
		RetryMaxDelay:      mapper.DefaultRetryMaxDelay,
		MetricsBindAddress: ":8080",
		Finalizers:         true,
	}
}

// AddFlags registers the flags.
func (o *RunOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Workers, "workers", o.Workers, "Objects synced concurrently (and, separately, status writes).")
	fs.DurationVar(&o.DiscoveryInterval, "discovery-interval", o.DiscoveryInterval, "How often the view's discovery (new resources) and the target's (CRDs appearing or going) are re-read.")
	fs.DurationVar(&o.SweepInterval, "orphan-sweep-interval", o.SweepInterval, "How often managed target objects are compared with the view and orphans deleted. The first sweep runs when the initial sync is complete.")
	fs.DurationVar(&o.ProgressInterval, "progress-interval", o.ProgressInterval, "How often the initial sync logs its progress.")
	fs.DurationVar(&o.RetryMaxDelay, "max-retry-delay", o.RetryMaxDelay, "Longest backoff between retries of a failing or conflicting object.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of the HTTP endpoint serving /metrics, /healthz and /readyz; \"0\" turns it off.")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "Serve Go's profiles at /debug/pprof on --metrics-bind-address (without authentication).")
	fs.BoolVar(&o.Finalizers, "location-finalizers", o.Finalizers, "Hold source objects with the location's finalizer (locations.mapper.kcp.io/<location>) until their copy is deleted from the target (docs/mapper.md, \"Deletion\"). Turned off, a deletion at the source is final at once: nobody at the source sees a copy still waiting to be deleted, copies of an unreachable location stay until it returns, and kcp.io/deletion-policy: Orphan is not honoured.")
}

// Validate returns an error naming every invalid value.
func (o *RunOptions) Validate() error {
	var errs []string
	if o.Workers < 1 {
		errs = append(errs, "--workers must be at least 1")
	}
	if o.DiscoveryInterval <= 0 || o.SweepInterval <= 0 || o.ProgressInterval <= 0 || o.RetryMaxDelay <= 0 {
		errs = append(errs, "--discovery-interval, --orphan-sweep-interval, --progress-interval and --max-retry-delay must be positive")
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid options: %s", strings.Join(errs, "; "))
	}
	return nil
}
