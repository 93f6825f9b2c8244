package app

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/healthserver"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
)

// NewCommand returns the `mapper` command: it maps one location's view onto a target cluster
// until SIGTERM or SIGINT. Its subcommand `verify` compares the two once.
func NewCommand() *cobra.Command {
	conn := NewConnectionOptions()
	run := NewRunOptions()
	le := NewLeaderElectionOptions()
	hb := NewHeartbeatOptions()
	logOptions := logs.NewOptions()
	cmd := &cobra.Command{
		Use:   "mapper",
		Short: "Map one location's view onto a target cluster",
		Long: "mapper reads one location's view of mapper-apiserver with client-go informers and keeps the target " +
			"cluster equal to it: it server-side applies every assigned object (labelled kcp.io/location=<location>, " +
			"annotated with its source), deletes copies whose source left the view, writes the status of opted-in " +
			"objects back through the view, and reports target objects in the way as conflicts. See docs/mapper.md.",
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := logsapi.ValidateAndApply(logOptions, nil); err != nil {
				return err
			}
			if err := errors.Join(run.Validate(), le.Validate(), hb.Validate()); err != nil {
				return err
			}
			clients, err := conn.Complete("cluster-mapper/mapper")
			if err != nil {
				return err
			}
			return runMapper(signalContext(), conn, clients, run, le, hb)
		},
	}
	conn.AddFlags(cmd.Flags())
	run.AddFlags(cmd.Flags())
	le.AddFlags(cmd.Flags())
	hb.AddFlags(cmd.Flags())
	logsapi.AddFlags(logOptions, cmd.Flags())
	cmd.CompletionOptions.DisableDefaultCmd = true
	cmd.AddCommand(NewVerifyCommand())
	return cmd
}

// runMapper serves the health endpoint and runs the mapper, and its heartbeat in the source,
// while this replica leads.
func runMapper(ctx context.Context, conn *ConnectionOptions, clients *Clients, run *RunOptions, le *LeaderElectionOptions, hb *HeartbeatOptions) error {
	ctx = klog.NewContext(ctx, klog.Background())
	mapper.RegisterMetrics()
	var current atomic.Pointer[mapper.Mapper]
	leading := func() bool { return !le.LeaderElect || current.Load() != nil }
	ready := healthz.NamedCheck("initial-sync", func(*http.Request) error {
		m := current.Load()
		switch {
		case m == nil && !leading():
			return nil // a standby replica is ready to take over
		case m == nil || !m.InitialSyncComplete():
			return errors.New("the initial sync is in progress")
		}
		return nil
	})
	var live []healthz.HealthChecker
	var watchdog *leaderelection.HealthzAdaptor
	if le.LeaderElect {
		// Fails /healthz when the lease has not been renewed for 20s past its expiry.
		watchdog = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
		live = append(live, watchdog)
	}
	if err := healthserver.Serve(ctx, run.MetricsBindAddress, live, []healthz.HealthChecker{ready}, run.Profiling); err != nil {
		return err
	}
	return le.runLeading(ctx, clients.Target, clients.Location, clients.Part, watchdog, func(ctx context.Context) error {
		return MapperConfig{
			Connection: conn, Clients: clients, RunOptions: run, Heartbeat: hb,
			Identity: le.Identity(), Mode: controlv1alpha1.ModePull, Started: current.Store,
		}.Run(ctx)
	})
}
