// Package location serves the read-only `locations` resource of mapper.kcp.io/v1alpha1: one
// Location per location that has assigned objects or connected watchers, with counts, computed
// from the cache (DESIGN.md: "locations itself is a read-only resource of the group").
package location
