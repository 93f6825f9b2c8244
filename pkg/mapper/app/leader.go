package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/component-base/config/options"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// LeaderElectionOptions configure leader election on a Lease in the target cluster, so that
// several replicas of a location's mapper can run side by side with one of them mapping. The
// flags are component-base's --leader-elect-* flags.
type LeaderElectionOptions struct {
	componentbaseconfig.LeaderElectionConfiguration

	identityOnce sync.Once
	identity     string
}

// Identity returns this process's identity: <hostname>_<uuid>, the holder of the leader
// election Lease and of the location's Lease in the source. It is the same for the
// process's lifetime.
func (o *LeaderElectionOptions) Identity() string {
	o.identityOnce.Do(func() {
		host, _ := os.Hostname()
		o.identity = host + "_" + string(uuid.NewUUID())
	})
	return o.identity
}

// NewLeaderElectionOptions returns the defaults: on, a Lease named
// cluster-mapper-<location> (cluster-mapper-<location>-<i>-of-<n> for a hash shard: leader
// election is per shard) in kube-system, 15s lease, 10s renew deadline, 2s retry period
// (kube-controller-manager's values).
func NewLeaderElectionOptions() *LeaderElectionOptions {
	return &LeaderElectionOptions{LeaderElectionConfiguration: componentbaseconfig.LeaderElectionConfiguration{
		LeaderElect:       true,
		LeaseDuration:     durationOf(15 * time.Second),
		RenewDeadline:     durationOf(10 * time.Second),
		RetryPeriod:       durationOf(2 * time.Second),
		ResourceLock:      resourcelock.LeasesResourceLock,
		ResourceNamespace: "kube-system",
	}}
}

// AddFlags registers component-base's --leader-elect-* flags.
func (o *LeaderElectionOptions) AddFlags(fs *pflag.FlagSet) {
	options.BindLeaderElectionFlags(&o.LeaderElectionConfiguration, fs)
	fs.Lookup("leader-elect-resource-name").Usage = "Name of the Lease in the target used for leader election. Empty: cluster-mapper-<location>, or cluster-mapper-<location>-<index>-of-<count> with --shard (one leader per shard)."
	fs.Lookup("leader-elect-resource-namespace").Usage = "Namespace of the Lease in the target used for leader election."
}

// Validate checks the durations and the lock type.
func (o *LeaderElectionOptions) Validate() error {
	if !o.LeaderElect {
		return nil
	}
	if o.ResourceLock != resourcelock.LeasesResourceLock {
		return fmt.Errorf("--leader-elect-resource-lock must be %q", resourcelock.LeasesResourceLock)
	}
	if o.LeaseDuration.Duration <= o.RenewDeadline.Duration || o.RenewDeadline.Duration <= o.RetryPeriod.Duration || o.RetryPeriod.Duration <= 0 {
		return errors.New("leader election needs --leader-elect-lease-duration > --leader-elect-renew-deadline > --leader-elect-retry-period > 0")
	}
	if o.ResourceNamespace == "" {
		return errors.New("--leader-elect-resource-namespace must not be empty")
	}
	return nil
}

// runLeading runs run while this process holds the Lease (or right away when leader
// election is off) and returns when ctx ends (nil) or leadership is lost (an error: the
// process should exit and be restarted, as Kubernetes controllers do). watchdog, when not
// nil, reports on /healthz whether the lease is being renewed.
func (o *LeaderElectionOptions) runLeading(ctx context.Context, target *rest.Config, location string, part contract.ViewPart, watchdog *leaderelection.HealthzAdaptor, run func(context.Context) error) error {
	if !o.LeaderElect {
		return run(ctx)
	}
	logger := klog.FromContext(ctx)
	id := o.Identity()
	name := o.ResourceName
	if name == "" {
		// One leader per shard: the replicas of a shard elect among themselves.
		name = "cluster-mapper-" + location
		if !part.Whole() {
			name += "-" + part.NameSuffix()
		}
	}
	client, err := kubernetes.NewForConfig(rest.AddUserAgent(target, "leader-election"))
	if err != nil {
		return err
	}
	lock, err := resourcelock.New(o.ResourceLock, o.ResourceNamespace, name, client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return err
	}
	var (
		runErr  error
		leading atomic.Bool
		done    = make(chan struct{})
	)
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.LeaseDuration.Duration,
		RenewDeadline:   o.RenewDeadline.Duration,
		RetryPeriod:     o.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		WatchDog:        watchdog,
		Name:            name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				leading.Store(true)
				defer close(done)
				logger.Info("Leading: this replica maps", "lease", o.ResourceNamespace+"/"+name, "identity", id)
				runErr = run(ctx)
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(identity string) {
				if identity != id {
					logger.Info("Standing by: another replica leads", "lease", o.ResourceNamespace+"/"+name, "leader", identity)
				}
			},
		},
	})
	if !leading.Load() {
		return nil // ctx ended while standing by
	}
	<-done // the mapper's context ended with the lease; let it stop
	if runErr != nil {
		return runErr
	}
	if ctx.Err() == nil {
		return errors.New("lost the leader lease")
	}
	return nil
}

func durationOf(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }
