// Package app is the command line of mapper-controller (cmd/mapper-controller): flags,
// logs, metrics and health endpoints from component-base and k8s.io/apiserver, leader
// election in the source, and the controllers it runs: the location lifecycle, push mode,
// placement, dependencies, StatusCollectors, status records and the status of Customizations.
package app

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/component-base/config/options"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/dependencies"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/placement"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/statuscollector"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
	"github.com/cluster-mapper/cluster-mapper/pkg/sourcecluster"
)

// Options are mapper-controller's flags.
type Options struct {
	// Kubeconfig is the source's kubeconfig; empty: $KUBECONFIG, ~/.kube/config, in-cluster.
	Kubeconfig string
	// LocationGracePeriod is --location-grace-period.
	LocationGracePeriod time.Duration
	// LeaseNamespace is where the locations' Leases and the leader election Lease are.
	LeaseNamespace string
	// Workers is the number of concurrent reconciles per controller.
	Workers int
	// KubeAPIQPS and KubeAPIBurst limit the controllers' and the Events' clients to the
	// source (each client its own limiter; leader election has its own client too), as
	// kube-controller-manager's --kube-api-qps and --kube-api-burst do.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// ConcurrentPlacementSyncs is how many namespaces the placement controller reconciles at
	// once (kube-controller-manager's --concurrent-*-syncs).
	ConcurrentPlacementSyncs int
	// ConcurrentPlacementWrites is how many server-side applies of placed objects the
	// placement controller has in flight at once, over all its namespaces.
	ConcurrentPlacementWrites int
	// ConcurrentDependencySyncs is how many namespaces the dependency controller reconciles
	// at once.
	ConcurrentDependencySyncs int
	// ConcurrentDependencyWrites is how many patches of dependencies the dependency
	// controller has in flight at once, over all its namespaces.
	ConcurrentDependencyWrites int
	// PlacementKubeAPIQPS and PlacementKubeAPIBurst limit the own client of the placement and
	// dependency controllers: placing a new Placement's objects is one write each, and
	// assigning their dependencies one more per dependency, which the shared client's limits
	// would stretch to an hour for 50,000 objects. The source's API Priority and Fairness
	// still applies.
	PlacementKubeAPIQPS   float32
	PlacementKubeAPIBurst int
	// StatusCollectorWorkers, StatusCollectorCostPerSummary, StatusCollectorCostPerSecond and
	// MaxStatusCollectorsPerNamespace configure the fair computation of StatusSummaries
	// (statuscollector.Config; docs/status.md, "Fairness and budgets").
	StatusCollectorWorkers          int
	StatusCollectorCostPerSummary   int64
	StatusCollectorCostPerSecond    int64
	MaxStatusCollectorsPerNamespace int
	// MaxCustomizationsPerNamespace and MaxMutationsPerNamespace are mapper-apiserver's flags
	// of the same names: the status of Customizations reports those past them (LimitExceeded).
	MaxCustomizationsPerNamespace int
	MaxMutationsPerNamespace      int
	// BindAddress serves /metrics, /healthz and /readyz ("0": nowhere).
	BindAddress string
	// Profiling serves Go's /debug/pprof on BindAddress (unauthenticated, so off by default;
	// kube-controller-manager serves it behind its authentication).
	Profiling bool
	// LeaderElection is component-base's leader election configuration.
	LeaderElection componentbaseconfig.LeaderElectionConfiguration
	// Push configures push mode's in-process mappers.
	Push *PushOptions
	// Clusters are --source-mode, --cluster-name and --source-cluster-path, as
	// mapper-apiserver's: how a source object's logical cluster is found and where writes to
	// it go (status records, Customizations' status). They must be mapper-apiserver's.
	Clusters *sourcecluster.Options
	// MapperAPIKubeconfig reaches mapper-apiserver's mapper.kcp.io API (`locations` and the
	// location views); empty: the source's server (its aggregator) without a trailing
	// /clusters/*, with the source's credentials.
	MapperAPIKubeconfig string
	// Controllers are --controllers: the controllers to run (Enabled).
	Controllers []string
	// ViewDiscoveryInterval is how often the views' discovery (the resources mapper-apiserver
	// mirrors, whose objects' metadata mapper-controller follows) is re-read.
	ViewDiscoveryInterval time.Duration
	// LocationAccess is the location-access mode, as mapper-apiserver's --location-access
	// (docs/tenancy.md): in Bound, Placements choose and StatusCollectors see only the
	// locations bound to their namespace, and the LocationBinding controller runs.
	LocationAccess string
	// UnboundReportResources are the resources (resource.group) whose objects get a Warning
	// Event UnboundLocation when their assignment names a location not bound to their
	// namespace (the Bound mode).
	UnboundReportResources []string
}

// NewOptions returns the defaults: a 40s grace period (node lifecycle's
// node-monitor-grace-period), cluster-mapper-system, leader election on the Lease
// cluster-mapper-system/mapper-controller with kube-controller-manager's timings.
func NewOptions() *Options {
	return &Options{
		LocationGracePeriod:             40 * time.Second,
		LeaseNamespace:                  contract.ControlNamespace,
		Workers:                         2,
		KubeAPIQPS:                      20,
		KubeAPIBurst:                    30,
		ConcurrentPlacementSyncs:        8,
		ConcurrentPlacementWrites:       placement.DefaultConcurrentWrites,
		ConcurrentDependencySyncs:       8,
		ConcurrentDependencyWrites:      dependencies.DefaultConcurrentWrites,
		PlacementKubeAPIQPS:             1000,
		PlacementKubeAPIBurst:           2000,
		StatusCollectorWorkers:          statuscollector.DefaultWorkers,
		StatusCollectorCostPerSummary:   statuscollector.DefaultCostPerSummary,
		StatusCollectorCostPerSecond:    statuscollector.DefaultCostPerSecond,
		MaxStatusCollectorsPerNamespace: statuscollector.DefaultMaxPerNamespace,
		MaxCustomizationsPerNamespace:   customization.DefaultMaxCustomizationsPerNamespace,
		MaxMutationsPerNamespace:        customization.DefaultMaxMutationsPerNamespace,
		BindAddress:                     ":8081",
		Push:                            NewPushOptions(),
		Clusters:                        sourcecluster.NewOptions(),
		ViewDiscoveryInterval:           10 * time.Second,
		Controllers:                     []string{"*"},
		LocationAccess:                  string(locationbinding.ModeBound),
		LeaderElection: componentbaseconfig.LeaderElectionConfiguration{
			LeaderElect:       true,
			LeaseDuration:     metav1.Duration{Duration: 15 * time.Second},
			RenewDeadline:     metav1.Duration{Duration: 10 * time.Second},
			RetryPeriod:       metav1.Duration{Duration: 2 * time.Second},
			ResourceLock:      resourcelock.LeasesResourceLock,
			ResourceName:      "mapper-controller",
			ResourceNamespace: contract.ControlNamespace,
		},
	}
}

// AddFlags registers the flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of the source. Empty: $KUBECONFIG, ~/.kube/config, then in-cluster.")
	fs.DurationVar(&o.LocationGracePeriod, "location-grace-period", o.LocationGracePeriod, "How long a location's Lease may go unrenewed before its SyncTarget's Ready condition becomes Unknown.")
	fs.StringVar(&o.LeaseNamespace, "lease-namespace", o.LeaseNamespace, "Namespace of the locations' Leases in the source.")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Concurrent reconciles per controller.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Requests per second to the source, per client (the controllers' and the Events'; leader election has its own). A value below zero turns client-side limiting off.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst of requests to the source above --kube-api-qps, per client.")
	fs.IntVar(&o.ConcurrentPlacementSyncs, "concurrent-placement-syncs", o.ConcurrentPlacementSyncs, "Namespaces whose Placements are reconciled at once.")
	fs.IntVar(&o.ConcurrentPlacementWrites, "concurrent-placement-writes", o.ConcurrentPlacementWrites, "Server-side applies of placed objects in flight at once, over all namespaces.")
	fs.IntVar(&o.ConcurrentDependencySyncs, "concurrent-dependency-syncs", o.ConcurrentDependencySyncs, "Namespaces whose dependencies are reconciled at once.")
	fs.IntVar(&o.ConcurrentDependencyWrites, "concurrent-dependency-writes", o.ConcurrentDependencyWrites, "Patches of dependencies' assignments in flight at once, over all namespaces.")
	fs.Float32Var(&o.PlacementKubeAPIQPS, "placement-kube-api-qps", o.PlacementKubeAPIQPS, "Requests per second of the own client of the placement and dependency controllers to the source (their writes of assignments). A value below zero turns client-side limiting off.")
	fs.IntVar(&o.PlacementKubeAPIBurst, "placement-kube-api-burst", o.PlacementKubeAPIBurst, "Burst of the placement and dependency controllers' requests above --placement-kube-api-qps.")
	fs.IntVar(&o.StatusCollectorWorkers, "status-collector-workers", o.StatusCollectorWorkers, "StatusSummaries computed at once; one namespace has one at most, so that its expensive StatusCollectors never hold another's.")
	fs.Int64Var(&o.StatusCollectorCostPerSummary, "status-collector-cost-per-summary", o.StatusCollectorCostPerSummary, "CEL cost units one StatusSummary may spend; past it the summary keeps its last results and the StatusCollector is marked Degraded.")
	fs.Int64Var(&o.StatusCollectorCostPerSecond, "status-collector-cost-per-second", o.StatusCollectorCostPerSecond, "CEL cost units per second the StatusCollectors of one namespace may spend on average; a namespace that spent more waits (Degraded, reason Throttled).")
	fs.IntVar(&o.MaxCustomizationsPerNamespace, "max-customizations-per-namespace", o.MaxCustomizationsPerNamespace, "mapper-apiserver's flag of the same name (keep them equal): the Customizations of a namespace past it are reported Degraded (LimitExceeded). 0: no limit.")
	fs.IntVar(&o.MaxMutationsPerNamespace, "max-mutations-per-namespace", o.MaxMutationsPerNamespace, "mapper-apiserver's flag of the same name (keep them equal): the Customizations whose mutations go past it are reported Degraded (LimitExceeded). 0: no limit.")
	fs.IntVar(&o.MaxStatusCollectorsPerNamespace, "max-status-collectors-per-namespace", o.MaxStatusCollectorsPerNamespace, "StatusCollectors of one namespace computed, the oldest first; the others are marked Degraded and their StatusSummaries left as they are.")
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "Address serving /metrics, /healthz and /readyz; \"0\" turns it off.")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "Serve Go's profiles at /debug/pprof on --bind-address (without authentication).")
	fs.StringVar(&o.LocationAccess, "location-access", o.LocationAccess, "\"Bound\" or \"Open\", as mapper-apiserver's --location-access (keep both the same): in Bound, Placements choose and StatusCollectors see only the locations a LocationBinding binds to their namespace, and the status of LocationBindings is kept. See docs/tenancy.md.")
	fs.StringSliceVar(&o.UnboundReportResources, "unbound-report-resources", o.UnboundReportResources, "With --location-access=Bound: resources (resource.group, e.g. configmaps,deployments.apps) whose objects get a Warning Event UnboundLocation when kcp.io/assigned-locations names a location not bound to their namespace (views ignore such assignments). Their metadata is watched, so mapper-controller needs list and watch on them; keep in step with mapper-apiserver's --resources. Empty: no such Events.")
	options.BindLeaderElectionFlags(&o.LeaderElection, fs)
	o.Push.AddFlags(fs)
	o.Clusters.AddFlags(fs)
	fs.StringSliceVar(&o.Controllers, "controllers", o.Controllers, "The controllers to run, as kube-controller-manager's flag: '*' runs every controller, 'foo' runs foo, '-foo' does not run foo. Controllers: "+strings.Join(AllControllers, ", ")+".")
	fs.StringVar(&o.MapperAPIKubeconfig, "mapper-apiserver-kubeconfig", o.MapperAPIKubeconfig, "Kubeconfig reaching mapper-apiserver's mapper.kcp.io API (locations and location views), directly or through an aggregator. Empty: the source's server (its aggregator), without a trailing /clusters/*, with --kubeconfig's credentials.")
	fs.DurationVar(&o.ViewDiscoveryInterval, "view-discovery-interval", o.ViewDiscoveryInterval, "How often the location views' discovery (the resources mapper-apiserver mirrors, whose objects' metadata the status record and Customization status controllers follow) is re-read.")
}

// Validate returns every invalid value.
func (o *Options) Validate() error {
	var errs []error
	if o.LocationGracePeriod < time.Second {
		errs = append(errs, errors.New("--location-grace-period must be at least 1s"))
	}
	if o.Workers < 1 {
		errs = append(errs, errors.New("--workers must be at least 1"))
	}
	if o.StatusCollectorWorkers < 1 || o.StatusCollectorCostPerSummary < 1 || o.StatusCollectorCostPerSecond < 1 || o.MaxStatusCollectorsPerNamespace < 1 {
		errs = append(errs, errors.New("--status-collector-workers, --status-collector-cost-per-summary, --status-collector-cost-per-second and --max-status-collectors-per-namespace must be at least 1"))
	}
	if o.KubeAPIQPS >= 0 && o.KubeAPIBurst < 1 {
		errs = append(errs, errors.New("--kube-api-burst must be at least 1 when --kube-api-qps is not negative"))
	}
	if o.ConcurrentPlacementSyncs < 1 {
		errs = append(errs, errors.New("--concurrent-placement-syncs must be at least 1"))
	}
	if o.ConcurrentPlacementWrites < 1 {
		errs = append(errs, errors.New("--concurrent-placement-writes must be at least 1"))
	}
	if o.ConcurrentDependencySyncs < 1 {
		errs = append(errs, errors.New("--concurrent-dependency-syncs must be at least 1"))
	}
	if o.ConcurrentDependencyWrites < 1 {
		errs = append(errs, errors.New("--concurrent-dependency-writes must be at least 1"))
	}
	if o.PlacementKubeAPIQPS >= 0 && o.PlacementKubeAPIBurst < 1 {
		errs = append(errs, errors.New("--placement-kube-api-burst must be at least 1 when --placement-kube-api-qps is not negative"))
	}
	if _, err := locationbinding.ParseMode(o.LocationAccess); err != nil {
		errs = append(errs, fmt.Errorf("--location-access: %w", err))
	}
	for _, r := range o.UnboundReportResources {
		if strings.TrimSpace(r) == "" {
			errs = append(errs, errors.New("--unbound-report-resources has an empty entry"))
		}
	}
	if o.LeaseNamespace == "" {
		errs = append(errs, errors.New("--lease-namespace must not be empty"))
	}
	le := o.LeaderElection
	if le.LeaderElect && (le.LeaseDuration.Duration <= le.RenewDeadline.Duration || le.RenewDeadline.Duration <= le.RetryPeriod.Duration || le.RetryPeriod.Duration <= 0) {
		errs = append(errs, errors.New("leader election needs --leader-elect-lease-duration > --leader-elect-renew-deadline > --leader-elect-retry-period > 0"))
	}
	if le.LeaderElect && le.ResourceLock != resourcelock.LeasesResourceLock {
		errs = append(errs, errors.New("--leader-elect-resource-lock must be leases"))
	}
	if o.ViewDiscoveryInterval < time.Second {
		errs = append(errs, errors.New("--view-discovery-interval must be at least 1s"))
	}
	errs = append(errs, o.Push.Validate(), o.Clusters.Validate(), o.validateControllers())
	return errors.Join(errs...)
}
