// Package app is the command line of mapper-controller (cmd/mapper-controller): flags,
// logs, metrics and health endpoints from component-base and k8s.io/apiserver, leader
// election in the source, and the controllers it runs: the location lifecycle and push mode.
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
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/placement"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
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
	// PlacementKubeAPIQPS and PlacementKubeAPIBurst limit the placement controller's own
	// client: placing a new Placement's objects is one write each (50,000 objects placed
	// within a minute is issue 15's target), which the shared client's limits would stretch
	// to an hour. The source's API Priority and Fairness still applies.
	PlacementKubeAPIQPS   float32
	PlacementKubeAPIBurst int
	// BindAddress serves /metrics, /healthz and /readyz ("0": nowhere).
	BindAddress string
	// Profiling serves Go's /debug/pprof on BindAddress (unauthenticated, so off by default;
	// kube-controller-manager serves it behind its authentication).
	Profiling bool
	// LeaderElection is component-base's leader election configuration.
	LeaderElection componentbaseconfig.LeaderElectionConfiguration
	// Push configures push mode's in-process mappers.
	Push *PushOptions
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
		LocationGracePeriod:       40 * time.Second,
		LeaseNamespace:            contract.ControlNamespace,
		Workers:                   2,
		KubeAPIQPS:                20,
		KubeAPIBurst:              30,
		ConcurrentPlacementSyncs:  8,
		ConcurrentPlacementWrites: placement.DefaultConcurrentWrites,
		PlacementKubeAPIQPS:       1000,
		PlacementKubeAPIBurst:     2000,
		BindAddress:               ":8081",
		Push:                      NewPushOptions(),
		LocationAccess:            string(locationbinding.ModeBound),
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
	fs.Float32Var(&o.PlacementKubeAPIQPS, "placement-kube-api-qps", o.PlacementKubeAPIQPS, "Requests per second of the placement controller's own client to the source (its writes of assignments). A value below zero turns client-side limiting off.")
	fs.IntVar(&o.PlacementKubeAPIBurst, "placement-kube-api-burst", o.PlacementKubeAPIBurst, "Burst of the placement controller's requests above --placement-kube-api-qps.")
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "Address serving /metrics, /healthz and /readyz; \"0\" turns it off.")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "Serve Go's profiles at /debug/pprof on --bind-address (without authentication).")
	fs.StringVar(&o.LocationAccess, "location-access", o.LocationAccess, "\"Bound\" or \"Open\", as mapper-apiserver's --location-access (keep both the same): in Bound, Placements choose and StatusCollectors see only the locations a LocationBinding binds to their namespace, and the status of LocationBindings is kept. See docs/tenancy.md.")
	fs.StringSliceVar(&o.UnboundReportResources, "unbound-report-resources", o.UnboundReportResources, "With --location-access=Bound: resources (resource.group, e.g. configmaps,deployments.apps) whose objects get a Warning Event UnboundLocation when kcp.io/assigned-locations names a location not bound to their namespace (views ignore such assignments). Their metadata is watched, so mapper-controller needs list and watch on them; keep in step with mapper-apiserver's --resources. Empty: no such Events.")
	options.BindLeaderElectionFlags(&o.LeaderElection, fs)
	o.Push.AddFlags(fs)
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
	if o.KubeAPIQPS >= 0 && o.KubeAPIBurst < 1 {
		errs = append(errs, errors.New("--kube-api-burst must be at least 1 when --kube-api-qps is not negative"))
	}
	if o.ConcurrentPlacementSyncs < 1 {
		errs = append(errs, errors.New("--concurrent-placement-syncs must be at least 1"))
	}
	if o.ConcurrentPlacementWrites < 1 {
		errs = append(errs, errors.New("--concurrent-placement-writes must be at least 1"))
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
	errs = append(errs, o.Push.Validate())
	return errors.Join(errs...)
}
