package view

import (
	"context"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

type locationKey struct{}

type partKey struct{}

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

// withPart returns a copy of ctx that carries the part of the location a view path selects
// (<view>/clusters/<clusters>/..., <view>/shards/<i>-of-<n>/...; contract.ViewPart).
func withPart(ctx context.Context, part contract.ViewPart) context.Context {
	return context.WithValue(ctx, partKey{}, part)
}

// PartFrom returns the part of the location a request is served for: the zero ViewPart (the
// whole location) on the base path.
func PartFrom(ctx context.Context) contract.ViewPart {
	p, _ := ctx.Value(partKey{}).(contract.ViewPart)
	return p
}

// ClusterFrom returns the logical cluster a request is served for: the one of a per-cluster view
// path (a part of exactly one cluster), or "" on the all-clusters base path and on a part of
// several clusters.
func ClusterFrom(ctx context.Context) string {
	return string(PartFrom(ctx).Cluster())
}
