package app

import (
	"context"
	"sync"

	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
)

// MapperConfig is one location's mapper as the command line or a controller configures it:
// cmd/mapper builds it from its flags (pull mode), mapper-controller from a SyncTarget and its
// kubeconfig Secret (push mode, pkg/controller/push). Both run it with Run, so the two modes
// map and heartbeat with the same code.
type MapperConfig struct {
	// Connection gives the cluster name and field manager (the rules `mapper verify` uses too).
	Connection *ConnectionOptions
	// Clients are the resolved view and target (ConnectionOptions.Complete or ClientsFor).
	Clients *Clients
	// RunOptions are the mapper's workers and timings (its MetricsBindAddress is not used
	// here: the caller serves the endpoint).
	RunOptions *RunOptions
	// Heartbeat configures the Lease and the SyncTarget status in the source.
	Heartbeat *HeartbeatOptions
	// Identity holds the location's Lease and is the status's mapper identity.
	Identity string
	// Mode is controlv1alpha1.ModePull or ModePush, written to the SyncTarget status.
	Mode string
	// Started, when not nil, is called with the mapper once it is built, before it runs.
	Started func(*mapper.Mapper)
}

// Run builds the mapper and runs it, with its heartbeat in the source, until ctx ends (nil)
// or the mapper fails (its error; mapper.New fails on client configs that cannot be used).
// The heartbeat stops with the mapper.
func (c MapperConfig) Run(ctx context.Context) error {
	conn, clients, run := c.Connection, c.Clients, c.RunOptions
	m, err := mapper.New(mapper.Config{
		Location:          clients.Location,
		View:              clients.View,
		Part:              clients.Part,
		Target:            clients.Target,
		Resources:         clients.Resources,
		NamespaceMapping:  clients.NamespaceMapping,
		ClusterName:       conn.ClusterName,
		FieldManager:      conn.FieldManager,
		Workers:           run.Workers,
		DiscoveryInterval: run.DiscoveryInterval,
		SweepInterval:     run.SweepInterval,
		ProgressInterval:  run.ProgressInterval,
		RetryMaxDelay:     run.RetryMaxDelay,
		NoFinalizers:      !run.Finalizers,
		// The heartbeat reads the SyncTarget: nothing is written on the target before it
		// says whether the location is paused.
		AwaitPause: c.Heartbeat != nil && c.Heartbeat.Register,
	})
	if err != nil {
		return err
	}
	if c.Started != nil {
		c.Started(m)
	}
	hctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.Heartbeat.run(hctx, conn, clients, c.Identity, c.Mode, m)
	}()
	return m.Run(ctx)
}
