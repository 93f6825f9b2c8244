// Package location serves the read-only `locations` resource of mapper.kcp.io/v1alpha1: one
// Location per location that is registered (a SyncTarget in the source) or has assigned objects
// or connected watchers, with the index's counts, the SyncTarget's status, the Lease's heartbeat
// and the resources the server cannot list (docs/design.md: "locations itself is a read-only
// resource of the group"), rendered as a Table for `kubectl get locations`.
package location
