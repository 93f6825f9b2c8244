package mapper

import (
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/sourcecluster"
)

// ClusterViews builds and keeps the dynamic clients of the per-cluster paths of a location's
// view (<view>/clusters/<cluster>, docs/design.md, "The location view"). Status is written through
// them: on the view's all-clusters path a write by namespace/name that several logical clusters
// hold answers 400, and the per-cluster path lets the view write the right source object. All
// clients share the view client's HTTP client (connections, TLS). The mapper writes status and
// confirms deletions (GoneFromView) through them, and `mapper verify` asks them whether an
// unlisted copy's source is gone. Safe for concurrent use.
type ClusterViews struct {
	paths *sourcecluster.PathClients
}

// NewClusterViews returns the per-cluster clients of the view whose all-clusters config is
// view. The error is rest.HTTPClientFor's.
func NewClusterViews(view *rest.Config) (*ClusterViews, error) {
	paths, err := sourcecluster.NewPathClients(view)
	if err != nil {
		return nil, err
	}
	return &ClusterViews{paths: paths}, nil
}

// For returns the client of cluster's view path, <view>/clusters/<cluster>, building it on
// first use. cluster must be a valid logical cluster name (else an error).
func (c *ClusterViews) For(cluster string) (dynamic.Interface, error) {
	if err := contract.ValidateClusterName(cluster); err != nil {
		return nil, fmt.Errorf("cannot write through the view: %w", err)
	}
	return c.paths.For("/" + contract.ClustersSegment + "/" + cluster)
}
