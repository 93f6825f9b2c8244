package mapper

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// GoneFromView reads src, an object of gvr, through clusterView, the client of the view's path
// of src's logical cluster (ClusterViews.For; on the all-clusters path a GET of a name that
// several clusters hold answers 400), with a consistent GET, and reports whether the object is
// not in the view: NotFound, another cluster's object of that name, or one the mapper does not
// map (defaultCluster is the cluster of an object without kcp.io/cluster). Any other answer is
// returned as an error, and then nothing may be taken as gone: a 503 for an object the view
// withholds (its rendering fails, docs/views.md), a 429 for a resource that has not synced, an
// unreachable server. The mapper deletes a copy only after this reports true, and `mapper
// verify` calls a copy an orphan only then.
func GoneFromView(ctx context.Context, clusterView dynamic.Interface, gvr schema.GroupVersionResource, src SourceRef, defaultCluster string) (bool, error) {
	obj, err := clusterView.Resource(gvr).Namespace(src.Namespace).Get(ctx, src.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("confirming through the view that %s %s is gone: %w", gvr.GroupResource(), src.String(), err)
	}
	return SourceOf(obj, defaultCluster).Cluster != src.Cluster || !Mapped(obj), nil
}
