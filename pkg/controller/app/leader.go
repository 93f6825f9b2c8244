package app

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"
)

// controllersStopTimeout bounds how long the controllers may take to stop after the leader
// Lease was lost before the process gives up and exits (runWhileLeading).
const controllersStopTimeout = time.Minute

// runWhileLeading runs run each time this process acquires the leader election Lease of cfg
// (cfg.Callbacks are set here), until ctx ends, and then returns nil.
//
// Losing the Lease (its renewal failed for the renew deadline, as in a source outage of a few
// seconds) cancels run's context; once run has returned, every controller stopped (their
// workers, informers and in-process mappers: run returns only then), the process is a
// candidate again and runs for the Lease anew, instead of exiting as client-go's RunOrDie
// callers do and waiting to be restarted (docs/locations.md, "mapper-controller"). The Lease
// is never held by two processes' controllers: a new term starts only after the old one has
// stopped. When run does not return within stopTimeout of the loss, runWhileLeading returns an
// error, and the process should exit and be restarted, as a Deployment does.
func runWhileLeading(ctx context.Context, cfg leaderelection.LeaderElectionConfig, stopTimeout time.Duration, run func(context.Context)) error {
	logger := klog.FromContext(ctx)
	name := cfg.Name
	for term := 1; ; term++ {
		var started atomic.Bool
		stopped := make(chan struct{})
		cfg.Callbacks = leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				started.Store(true)
				defer close(stopped)
				logger.Info("Leading: running the controllers", "lease", name, "identity", cfg.Lock.Identity(), "term", term)
				run(ctx)
			},
			OnStoppedLeading: func() {},
		}
		le, err := leaderelection.NewLeaderElector(cfg)
		if err != nil {
			return err
		}
		if cfg.WatchDog != nil {
			cfg.WatchDog.SetLeaderElection(le)
		}
		le.Run(ctx)
		if ctx.Err() != nil {
			// Shutting down (the Lease is released): let a running term finish stopping.
			if started.Load() {
				select {
				case <-stopped:
				case <-time.After(stopTimeout):
				}
			}
			return nil
		}
		// Run returned with ctx alive: the Lease was acquired (Run waits for that as long as
		// ctx lives) and then lost, and run's context is cancelled.
		select {
		case <-stopped:
		case <-time.After(stopTimeout):
			return fmt.Errorf("the controllers did not stop within %v after the leader Lease %s was lost", stopTimeout, name)
		}
		logger.Info("Lost the leader Lease; the controllers stopped. Running for leader again", "lease", name, "term", term)
	}
}
