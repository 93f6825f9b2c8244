package mapper

import (
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/sourcecluster"
)

// clusterViews builds and keeps the dynamic clients of the per-cluster paths of a location's
// view (<view>/clusters/<cluster>, docs/design.md "The location view"), within the mapper's
// hash shard when it has one (<view>/clusters/<cluster>/shards/<i>-of-<n>). Status and
// finalizers are written, and deletions confirmed, through them: on the view's all-clusters
// path a write by namespace/name that several logical clusters hold answers 400, and the
// per-cluster path lets the view write the right source object; the shard in the path makes
// the view refuse (404) a write outside the shard. All clients share the view client's HTTP
// client (connections, TLS).
type clusterViews struct {
	paths *sourcecluster.PathClients
	shard contract.Shard
}

// newClusterViews returns the per-cluster clients, within shard, of the view whose
// all-clusters config is view.
func newClusterViews(view *rest.Config, shard contract.Shard) (*clusterViews, error) {
	paths, err := sourcecluster.NewPathClients(view)
	if err != nil {
		return nil, err
	}
	return &clusterViews{paths: paths, shard: shard}, nil
}

// For returns the client of cluster's view path, building it on first use. cluster must be a
// valid logical cluster name.
func (c *clusterViews) For(cluster string) (dynamic.Interface, error) {
	if err := contract.ValidateClusterName(cluster); err != nil {
		return nil, fmt.Errorf("cannot write through the view: %w", err)
	}
	return c.paths.For(contract.ViewPart{Clusters: []contract.ClusterName{contract.ClusterName(cluster)}, Shard: c.shard}.Path())
}
