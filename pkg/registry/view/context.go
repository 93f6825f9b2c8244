package view

import "context"

type locationKey struct{}

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
