// Package push is mapper-controller's push mode (the original multi-cluster
// design's cluster controller): for every SyncTarget with spec.kubeconfigSecretRef it runs
// the location's mapper in-process (pkg/mapper/app.MapperConfig, the code cmd/mapper runs in
// pull mode) with the kubeconfig of that Secret as its target and mapper-controller's own
// credentials for the view and the heartbeat. It starts a mapper when such a SyncTarget
// appears, restarts it when its kubeconfig changes, and stops it when the SyncTarget goes
// or switches to pull mode. Stopping a mapper never deletes anything on its target.
// A Secret that is missing, not allowed or unusable sets Ready=False with a reason.
package push
