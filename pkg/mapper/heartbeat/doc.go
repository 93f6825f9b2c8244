// Package heartbeat is the mapper's registration in the source: while a mapper leads, it
// renews the Lease cluster-mapper-system/<location> (as kubelets renew node Leases, with
// k8s.io/component-helpers' lease controller) and writes its SyncTarget's status when it
// changes, and at most once per status interval otherwise (docs/design.md, "The control plane
// objects"). Both are reached through the kube-apiserver that serves the view
// (SourceConfig).
package heartbeat
