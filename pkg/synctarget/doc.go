// Package synctarget reads and writes SyncTargets (control.mapper.kcp.io/v1alpha1, a CRD in
// the source) with a dynamic client, converting to and from the Go types of
// pkg/apis/control/v1alpha1. The mapper writes a SyncTarget's status through it, and the
// location lifecycle controller its Ready condition.
package synctarget
