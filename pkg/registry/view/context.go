package view

import "context"

type locationKey struct{}

type clusterKey struct{}

// withLocation returns a copy of ctx that carries the location whose view is being served.
func withLocation(ctx context.Context, location string) context.Context {
	return context.WithValue(ctx, locationKey{}, location)
}

// LocationFrom returns the location whose view a request is served for, and whether ctx is a
// view request at all.
func LocationFrom(ctx context.Context) (string, bool) {
	l, ok := ctx.Value(locationKey{}).(string)
	return l, ok && l != ""
}

// withCluster returns a copy of ctx that carries the logical cluster of a per-cluster view path
// (<view>/clusters/<cluster>/...).
func withCluster(ctx context.Context, cluster string) context.Context {
	return context.WithValue(ctx, clusterKey{}, cluster)
}

// ClusterFrom returns the logical cluster a request is served for: the one of a per-cluster view
// path, or "" on the all-clusters base path.
func ClusterFrom(ctx context.Context) string {
	c, _ := ctx.Value(clusterKey{}).(string)
	return c
}
