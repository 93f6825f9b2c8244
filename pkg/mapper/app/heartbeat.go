package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper/heartbeat"
)

// HeartbeatOptions configure the mapper's registration in the source: its Lease and its
// SyncTarget's status (package heartbeat).
type HeartbeatOptions struct {
	// Register is --register: renew the Lease and write the SyncTarget status while leading.
	Register bool
	// SourceKubeconfig is --source-kubeconfig; empty derives the source from the view URL
	// (the kube-apiserver whose aggregator serves the view), with the view's credentials.
	SourceKubeconfig string
	// LeaseNamespace, RenewInterval, LeaseDuration and StatusInterval are the heartbeat.Config
	// fields of the same names.
	LeaseNamespace string
	RenewInterval  time.Duration
	LeaseDuration  time.Duration
	StatusInterval time.Duration
}

// NewHeartbeatOptions returns the defaults: on, cluster-mapper-system, renew every 10s, a
// 40s Lease, status at least once a minute.
func NewHeartbeatOptions() *HeartbeatOptions {
	return &HeartbeatOptions{
		Register:       true,
		LeaseNamespace: heartbeat.DefaultLeaseNamespace,
		RenewInterval:  heartbeat.DefaultRenewInterval,
		LeaseDuration:  heartbeat.DefaultLeaseDuration,
		StatusInterval: heartbeat.DefaultStatusInterval,
	}
}

// AddFlags registers the flags.
func (o *HeartbeatOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Register, "register", o.Register, "While leading, renew the Lease <lease-namespace>/<location> in the source and write the status of the SyncTarget <location> (see docs/locations.md).")
	fs.StringVar(&o.SourceKubeconfig, "source-kubeconfig", o.SourceKubeconfig, "Kubeconfig of the source kube-apiserver for the Lease and the SyncTarget. Empty: the view's server without the view path, with the view's credentials.")
	fs.StringVar(&o.LeaseNamespace, "lease-namespace", o.LeaseNamespace, "Namespace of the location's Lease in the source.")
	fs.DurationVar(&o.RenewInterval, "lease-renew-interval", o.RenewInterval, "How often the Lease is renewed and the status observed.")
	fs.DurationVar(&o.LeaseDuration, "lease-duration", o.LeaseDuration, "spec.leaseDurationSeconds of the Lease.")
	fs.DurationVar(&o.StatusInterval, "status-interval", o.StatusInterval, "Longest time between two SyncTarget status writes, and between two verifications for its counts; a change is written at once.")
}

// Validate checks the durations.
func (o *HeartbeatOptions) Validate() error {
	if !o.Register {
		return nil
	}
	if o.RenewInterval <= 0 || o.StatusInterval <= 0 || o.LeaseDuration < time.Second || o.LeaseDuration <= o.RenewInterval {
		return errors.New("--lease-renew-interval and --status-interval must be positive, and --lease-duration at least 1s and longer than --lease-renew-interval")
	}
	if o.LeaseNamespace == "" {
		return errors.New("--lease-namespace must not be empty")
	}
	return nil
}

// pauseOf returns what a SyncTarget's spec asks of its mappers (the zero Pause for nil: no
// SyncTarget).
func pauseOf(spec *controlv1alpha1.SyncTargetSpec) mapper.Pause {
	if spec == nil {
		return mapper.Pause{}
	}
	return mapper.Pause{Paused: spec.Paused, HaltedResources: spec.HaltedResources}
}

// sourceConfig returns the source's client config.
func (o *HeartbeatOptions) sourceConfig(view *rest.Config) (*rest.Config, error) {
	if o.SourceKubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.SourceKubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading --source-kubeconfig: %w", err)
		}
		return cfg, nil
	}
	return heartbeat.SourceConfig(view)
}

// run runs the heartbeat of m, reporting mode (controlv1alpha1.ModePull or ModePush), until
// ctx ends; conn gives verify the mapper's own rules. On every renewal it puts the
// SyncTarget's spec.paused and spec.haltedResources in force (mapper.Mapper.SetPause; m waits
// for the first, mapper.Config.AwaitPause); when it cannot run at all, m runs unpaused.
func (o *HeartbeatOptions) run(ctx context.Context, conn *ConnectionOptions, clients *Clients, identity, mode string, m *mapper.Mapper) {
	if !o.Register {
		return
	}
	logger := klog.FromContext(ctx)
	source, err := o.sourceConfig(clients.View)
	if err != nil {
		logger.Error(err, "Cannot register the location (no source to write to), nor read whether it is paused; mapping goes on")
		m.SetPause(ctx, mapper.Pause{})
		return
	}
	target, err := kubernetes.NewForConfig(clients.Target)
	if err != nil {
		logger.Error(err, "Cannot register the location, nor read whether it is paused; mapping goes on")
		m.SetPause(ctx, mapper.Pause{})
		return
	}
	observer := &heartbeat.Observer{Mapper: m, Target: target, Verify: VerifyConfig(conn, clients, true)}
	err = heartbeat.Run(ctx, heartbeat.Config{
		Location: clients.Location, Part: clients.Part, Identity: identity, Version: version.Get().GitVersion, Mode: mode,
		Source: source, LeaseNamespace: o.LeaseNamespace, RenewInterval: o.RenewInterval, LeaseDuration: o.LeaseDuration,
		StatusInterval: o.StatusInterval, Observe: observer.Observe, Spec: func(ctx context.Context, spec *controlv1alpha1.SyncTargetSpec) {
			m.SetPause(ctx, pauseOf(spec))
		},
	})
	if err != nil {
		logger.Error(err, "Cannot register the location, nor read whether it is paused; mapping goes on")
		m.SetPause(ctx, mapper.Pause{})
	}
}
