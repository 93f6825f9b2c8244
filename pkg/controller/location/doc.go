// Package location is the location lifecycle controller of mapper-controller, modelled on
// kube-controller-manager's node lifecycle controller: a location's mapper renews the Lease
// cluster-mapper-system/<location> in the source; when the Lease has not been renewed for
// the grace period, the controller sets the SyncTarget's Ready condition to Unknown
// (reason MapperLeaseExpired, or MapperNeverRenewed when there is no Lease). While the Lease
// is renewed, Ready is the mapper's own report (True, or False with its reason), which the
// controller leaves alone. Every transition of Ready is recorded as an Event on the
// SyncTarget.
package location
