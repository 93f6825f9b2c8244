package mapper

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// Config configures a Mapper. Zero durations and counts take the defaults named below.
type Config struct {
	// Location is the location whose view is read; target objects are labelled with it.
	Location string
	// View is the client config of the location's view (its Host is the view's base URL, of
	// the whole location: Part is not in it).
	View *rest.Config
	// Part is the part of the location this mapper owns (contract.ViewPart: some logical
	// clusters, a hash shard of --shard, or both; the zero ViewPart is the whole location). It
	// lists and watches only <view>/<part> and applies, sweeps and deletes only copies whose
	// source (cluster, namespace) is in it, so that several mappers share one location and
	// target (docs/mapper.md, "Shards").
	Part contract.ViewPart
	// Target is the client config of the target cluster.
	Target *rest.Config
	// Resources restricts the mapped resources ("configmaps", "deployments.apps"); empty maps
	// every resource the view's discovery serves with list and watch, following it as CRDs
	// come and go.
	Resources []schema.GroupResource
	// NamespaceMapping decides target namespaces; default NamespaceMappingAuto (resolved once
	// per start, see ResolveNamespaceMapping).
	NamespaceMapping NamespaceMapping
	// ClusterName is the logical cluster of view objects without contract.ClusterAnnotation; default
	// "default", as mapper-apiserver's --cluster-name.
	ClusterName string
	// FieldManager is the server-side apply field manager on the target; default
	// "cluster-mapper".
	FieldManager string
	// Workers is the number of concurrent syncs, and of concurrent status writes; default
	// DefaultWorkers.
	Workers int
	// DiscoveryInterval is how often the view's and the target's discovery are re-read (new
	// resources, CRDs appearing on the target); default 30s.
	DiscoveryInterval time.Duration
	// SweepInterval is how often managed target objects are compared with the view and
	// orphans deleted; default 5m. The first sweep runs once the initial sync is complete.
	SweepInterval time.Duration
	// ProgressInterval is how often the initial sync logs its progress; default 10s.
	ProgressInterval time.Duration
	// RetryBaseDelay and RetryMaxDelay bound the exponential backoff of failed objects;
	// defaults 500ms and 5m.
	RetryBaseDelay, RetryMaxDelay time.Duration
	// NoFinalizers turns the deletion protocol off (deletion.go): no location finalizer is
	// added, so a deletion at the source is final at once and copies are deleted when their
	// object leaves the view, as before the protocol (docs/mapper.md, "Deletion", says what is
	// lost). The zero value keeps it on.
	NoFinalizers bool
	// AwaitPause makes the mapper write and delete nothing on the target until the first
	// SetPause (the heartbeat reads the location's SyncTarget and calls it with spec.paused
	// and spec.haltedResources): a mapper that starts while its location is paused changes
	// nothing there. The zero value starts unpaused (no SyncTarget is read).
	AwaitPause bool
}

// Defaults of Config.
const (
	DefaultClusterName       = "default"
	DefaultFieldManager      = "cluster-mapper"
	DefaultWorkers           = 16
	DefaultDiscoveryInterval = 30 * time.Second
	DefaultSweepInterval     = 5 * time.Minute
	DefaultProgressInterval  = 10 * time.Second
	DefaultRetryBaseDelay    = 500 * time.Millisecond
	DefaultRetryMaxDelay     = 5 * time.Minute
)

// complete fills in defaults.
func (c *Config) complete() {
	if c.NamespaceMapping == "" {
		c.NamespaceMapping = NamespaceMappingAuto
	}
	if c.ClusterName == "" {
		c.ClusterName = DefaultClusterName
	}
	if c.FieldManager == "" {
		c.FieldManager = DefaultFieldManager
	}
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	if c.DiscoveryInterval <= 0 {
		c.DiscoveryInterval = DefaultDiscoveryInterval
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = DefaultProgressInterval
	}
	if c.RetryBaseDelay <= 0 {
		c.RetryBaseDelay = DefaultRetryBaseDelay
	}
	if c.RetryMaxDelay <= 0 {
		c.RetryMaxDelay = DefaultRetryMaxDelay
	}
}
