package app

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go's request and workqueue metrics
	_ "k8s.io/component-base/metrics/prometheus/workqueue"
	"k8s.io/klog/v2"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/binding"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/dependencies"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/informers"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/location"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/managedfields"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/placement"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/push"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/served"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/statuscollector"
	"github.com/cluster-mapper/cluster-mapper/pkg/healthserver"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
)

// NewCommand returns the mapper-controller command: it runs the control plane controllers
// against the source while it holds the leader election Lease, until SIGTERM or SIGINT.
func NewCommand() *cobra.Command {
	o := NewOptions()
	logOptions := logs.NewOptions()
	cmd := &cobra.Command{
		Use:   "mapper-controller",
		Short: "Run the control plane controllers of cluster-mapper against the source",
		Long: "mapper-controller runs the controllers of the control.mapper.kcp.io objects in the source. Its location " +
			"lifecycle controller sets a SyncTarget's Ready condition to Unknown when the location's mapper has not renewed " +
			"its Lease (cluster-mapper-system/<location>) for --location-grace-period, and records Events when Ready " +
			"changes. Its push mode controller runs a mapper in-process for every SyncTarget with spec.kubeconfigSecretRef " +
			"(the --push-mapper-* flags are cmd/mapper's). See docs/locations.md. Its placement controller places the objects " +
			"Placements select (docs/placement.md), and its dependency controller assigns what assigned workloads reference " +
			"to their locations (docs/dependencies.md). It keeps the per-location status records of source objects in step " +
			"with their assignments and writes the status of Customizations, from what mapper-apiserver's views and locations " +
			"report (docs/status.md, docs/customization.md).",
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := logsapi.ValidateAndApply(logOptions, nil); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return Run(genericapiserver.SetupSignalContext(), o)
		},
	}
	o.AddFlags(cmd.Flags())
	logsapi.AddFlags(logOptions, cmd.Flags())
	cmd.CompletionOptions.DisableDefaultCmd = true
	return cmd
}

// Run serves the health and metrics endpoint and runs the controllers while leading, until
// ctx ends (nil). When leadership is lost the controllers stop and the process runs for
// leader again (runWhileLeading); it returns an error only when they do not stop in time.
func Run(ctx context.Context, o *Options) error {
	logger := klog.FromContext(ctx)
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("loading the source kubeconfig: %w", err)
	}
	cfg = rest.AddUserAgent(cfg, "mapper-controller")
	// rest.AddUserAgent changes the config it is given: copy first.
	electionCfg := rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election") // client-go's default limits: renewals only
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// Leader election and Events get clients of their own, hence client-side rate limiters of
	// their own (as kube-controller-manager's): a burst of Events (1,000 locations becoming
	// Ready) must neither delay a lease renewal until leadership is lost nor the controllers'
	// status writes (found by scenario 8 of test/bench).
	electionKube, err := kubernetes.NewForConfig(electionCfg)
	if err != nil {
		return err
	}
	eventsKube, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "events"))
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	placementCfg := rest.AddUserAgent(rest.CopyConfig(cfg), "placement")
	placementCfg.QPS, placementCfg.Burst = o.PlacementKubeAPIQPS, o.PlacementKubeAPIBurst
	placementDyn, err := dynamic.NewForConfig(placementCfg)
	if err != nil {
		return err
	}
	placementMetadata, err := metadata.NewForConfig(placementCfg)
	if err != nil {
		return err
	}
	metadataClient, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	// Kinds of placed and referenced resources: discovery once, again when a resource is not
	// known (served.Resolver, at most every 10 s).
	cachedDiscovery := memory.NewMemCacheClient(disco)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cachedDiscovery)
	views, err := newViewControllers(o, cfg, dyn, metadataClient, cachedDiscovery)
	if err != nil {
		return err
	}
	var watchdog *leaderelection.HealthzAdaptor
	var live []healthz.HealthChecker
	if o.LeaderElection.LeaderElect {
		watchdog = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
		live = append(live, watchdog)
	}
	if err := healthserver.Serve(ctx, o.BindAddress, live, nil, o.Profiling); err != nil {
		return err
	}

	run := func(ctx context.Context) {
		scheme := runtime.NewScheme()
		_ = clientgoscheme.AddToScheme(scheme)
		_ = controlv1alpha1.AddToScheme(scheme)
		broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: eventsKube.EventsV1()})
		if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
			logger.Error(err, "Cannot record Events")
		}
		defer broadcaster.Shutdown()
		recorder := broadcaster.NewRecorder(scheme, "mapper-controller")
		o.Push.Complete(o.LeaseNamespace)
		// The placement and dependency controllers read their own managedFields entries only.
		shared := informers.NewSet(dyn, metadataClient, managedfields.Keep(placement.FieldManager, dependencies.FieldManager))
		defer shared.Shutdown()
		resolver := served.New(mapper)
		// The Bound mode (docs/tenancy.md): the bindings the Placements and StatusCollectors
		// read (nil in the Open mode: every location bound).
		var bindings *binding.Tracker
		if access, _ := locationbinding.ParseMode(o.LocationAccess); access == locationbinding.ModeBound {
			bindings = binding.NewTracker(shared)
		}
		controllers := map[string]func(context.Context){
			StatusCollectorController: func(ctx context.Context) {
				statuscollector.New(statuscollector.Config{Dynamic: dyn, Informers: shared, Workers: o.StatusCollectorWorkers,
					CostPerSummary: o.StatusCollectorCostPerSummary, CostPerSecond: o.StatusCollectorCostPerSecond,
					MaxPerNamespace: o.MaxStatusCollectorsPerNamespace, Bindings: bindings}).Run(ctx)
			},
			PlacementController: func(ctx context.Context) {
				placement.New(placement.Config{Dynamic: placementDyn, Metadata: placementMetadata, Informers: shared, Resolver: resolver, Workers: o.ConcurrentPlacementSyncs, ConcurrentWrites: o.ConcurrentPlacementWrites, Recorder: recorder, Bindings: bindings}).Run(ctx)
			},
			DependencyController: func(ctx context.Context) {
				dependencies.New(dependencies.Config{Dynamic: placementDyn, Metadata: placementMetadata, Informers: shared, Resolver: resolver, Workers: o.ConcurrentDependencySyncs, ConcurrentWrites: o.ConcurrentDependencyWrites, Recorder: recorder}).Run(ctx)
			},
			PushController: func(ctx context.Context) {
				push.New(push.Config{
					Kube: kube, Dynamic: dyn, Informers: shared, Source: cfg, SecretNamespace: o.Push.SecretNamespace, AllowProxyURL: o.Push.AllowProxyURL,
					Connection: o.Push.Connection, RunOptions: o.Push.Run, Heartbeat: o.Push.Heartbeat,
					Workers: o.Workers, Recorder: recorder,
				}).Run(ctx)
			},
			LocationController: func(ctx context.Context) {
				location.New(location.Config{
					Kube: kube, Dynamic: dyn, Informers: shared, LeaseNamespace: o.LeaseNamespace, GracePeriod: o.LocationGracePeriod,
					Workers: o.Workers, Recorder: recorder, Metadata: metadataClient, Discovery: kube.Discovery(),
				}).Run(ctx)
			},
			LocationBindingController: func(ctx context.Context) {
				if bindings == nil {
					return // the Open mode: no bindings to keep or report
				}
				runBindingControllers(ctx, o, dyn, bindings, shared, mapper, recorder)
			},
			viewControllersName: func(ctx context.Context) {
				views.run(ctx, o.Enabled(StatusRecordsController), o.Enabled(CustomizationStatusController), bindings, shared)
			},
		}
		var wg sync.WaitGroup
		for name, run := range controllers {
			if name != viewControllersName && !o.Enabled(name) {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				run(ctx)
			}()
		}
		wg.Wait()
	}
	if !o.LeaderElection.LeaderElect {
		run(ctx)
		return nil
	}
	host, _ := os.Hostname()
	id := host + "_" + string(uuid.NewUUID()) // one identity for every term of this process
	le := o.LeaderElection
	lock, err := resourcelock.New(le.ResourceLock, le.ResourceNamespace, le.ResourceName, electionKube.CoreV1(), electionKube.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return err
	}
	return runWhileLeading(ctx, leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: le.LeaseDuration.Duration, RenewDeadline: le.RenewDeadline.Duration, RetryPeriod: le.RetryPeriod.Duration,
		ReleaseOnCancel: true, WatchDog: watchdog, Name: le.ResourceName,
	}, controllersStopTimeout, run)
}
