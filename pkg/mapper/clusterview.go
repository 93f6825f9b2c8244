package mapper

import (
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/sourcecluster"
)

// ClusterViews builds and keeps the dynamic clients of the per-cluster paths of a location's
// view (<view>/clusters/<cluster>, docs/design.md, "The location view"), within a hash shard
// when the caller owns one (<view>/clusters/<cluster>/shards/<i>-of-<n>; docs/mapper.md,
// "Shards"). Status and finalizers are written through them: on the view's all-clusters path
// a write by namespace/name that several logical clusters hold answers 400, and the
// per-cluster path lets the view write the right source object; the shard in the path makes
// the view refuse (404) a write outside the shard. All clients share the view client's HTTP
// client (connections, TLS). The mapper writes status and confirms deletions (GoneFromView)
// through them, and `mapper verify` asks them whether an unlisted copy's source is gone. Safe
// for concurrent use.
type ClusterViews struct {
	paths *sourcecluster.PathClients
	shard contract.Shard
}

// NewClusterViews returns the per-cluster clients, within shard (the zero Shard: none), of the
// view whose all-clusters config is view. The error is rest.HTTPClientFor's.
func NewClusterViews(view *rest.Config, shard contract.Shard) (*ClusterViews, error) {
	paths, err := sourcecluster.NewPathClients(view)
	if err != nil {
		return nil, err
	}
	return &ClusterViews{paths: paths, shard: shard}, nil
}

// For returns the client of cluster's view path, <view>/clusters/<cluster>[/shards/<i>-of-<n>], building it on
// first use. cluster must be a valid logical cluster name (else an error).
func (c *ClusterViews) For(cluster string) (dynamic.Interface, error) {
	if err := contract.ValidateClusterName(cluster); err != nil {
		return nil, fmt.Errorf("cannot write through the view: %w", err)
	}
	return c.paths.For(contract.ViewPart{Clusters: []contract.ClusterName{contract.ClusterName(cluster)}, Shard: c.shard}.Path())
}
