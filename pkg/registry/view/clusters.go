package view

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// maxAmbiguousClustersNamed bounds the clusters an ambiguity Status names one by one.
const maxAmbiguousClustersNamed = 20

// clusters resolves the logical cluster of requests inside a view (docs/design.md, "The location
// view"): a per-cluster path (<view>/clusters/<cluster>/...) serves that cluster; the
// all-clusters base path serves every cluster, and a request by namespace/name there must match
// objects of one cluster only.
type clusters struct {
	// plain is the one logical cluster of a plain source, "" for a kcp source (many clusters,
	// each object's named by kcp.io/cluster).
	plain string
}

// requestCluster returns the cluster a request names by its path, or on a plain source its one
// cluster ("" on a kcp source's all-clusters path).
func (c clusters) requestCluster(ctx context.Context) string {
	if cl := ClusterFrom(ctx); cl != "" {
		return cl
	}
	return c.plain
}

// find returns location's object namespace/name of the request's cluster: on a per-cluster
// path (or a plain source) that cluster's, on a kcp source's all-clusters path (or a part of
// several clusters) the only cluster's that holds it. An object outside the request's part
// (PartFrom) is not there. 404 when there is none; 400 naming the clusters when several hold it.
func (c clusters) find(ctx context.Context, store Store, gr schema.GroupResource, location, namespace, name string) (*cache.Object, error) {
	part := PartFrom(ctx)
	if cl := c.requestCluster(ctx); cl != "" {
		obj, _, ok := store.GetInCluster(location, cl, namespace, name)
		if ok && !part.Contains(cl, namespace) {
			return nil, apierrors.NewNotFound(gr, name)
		}
		if !ok {
			if err := store.WithheldError(location, cl, namespace, name); err != nil {
				return nil, err
			}
			return nil, apierrors.NewNotFound(gr, name)
		}
		return obj, nil
	}
	objs, _ := store.Lookup(location, namespace, name)
	if !part.Whole() {
		objs = slices.DeleteFunc(objs, func(o *cache.Object) bool { return !part.Contains(o.Cluster(), namespace) })
	}
	switch len(objs) {
	case 0:
		if err := store.WithheldError(location, "", namespace, name); err != nil {
			return nil, err
		}
		return nil, apierrors.NewNotFound(gr, name)
	case 1:
		return objs[0], nil
	}
	names := make([]string, len(objs))
	for i, o := range objs {
		names[i] = o.Cluster()
	}
	return nil, ambiguous(ctx, gr, location, namespace, name, names)
}

// ambiguous is the 400 of a request by namespace/name on the all-clusters path that matches
// objects of several logical clusters (docs/design.md): it names the clusters and the per-cluster
// path to use, and lists each cluster's path as a cause.
func ambiguous(ctx context.Context, gr schema.GroupResource, location, namespace, name string, clusterNames []string) error {
	inner := "/..."
	if info, ok := genericapirequest.RequestInfoFrom(ctx); ok && info.Path != "" {
		inner = info.Path
	}
	what := fmt.Sprintf("%s %q", gr.String(), name)
	if namespace != "" {
		what += fmt.Sprintf(" in namespace %q", namespace)
	}
	named := clusterNames
	more := ""
	if len(named) > maxAmbiguousClustersNamed {
		named, more = named[:maxAmbiguousClustersNamed], fmt.Sprintf(" and %d more", len(clusterNames)-maxAmbiguousClustersNamed)
	}
	err := apierrors.NewBadRequest(fmt.Sprintf("%s exists in %d logical clusters of the view of location %q (%s%s): "+
		"name the cluster in the path, %s%s",
		what, len(clusterNames), location, strings.Join(named, ", "), more,
		contract.ViewPath(location, "<cluster>"), inner))
	details := &metav1.StatusDetails{Name: name, Group: gr.Group, Kind: gr.Resource}
	for _, cl := range named {
		details.Causes = append(details.Causes, metav1.StatusCause{
			Type:    metav1.CauseTypeFieldValueDuplicate,
			Field:   "metadata.annotations[" + contract.ClusterAnnotation + "]",
			Message: contract.ViewPath(location, contract.ClusterName(cl)) + inner,
		})
	}
	err.ErrStatus.Details = details
	return err
}
