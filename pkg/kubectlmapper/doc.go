// Package kubectlmapper is the kubectl plugin `kubectl mapper` (cmd/kubectl-mapper): the
// day-2 tasks of docs/day2.md over what the servers already report.
//
//   - locations: the Locations mapper-apiserver serves (mapper.kcp.io/v1alpha1, the same
//     counts as `kubectl get locations`) joined with their SyncTargets' shards;
//   - where: one source object's locations, read from its annotations and finalizers (the
//     assignment and who wrote it, the outcome record outcome.kcp.io/<location>, the status
//     record status.kcp.io/<location>, the location finalizer);
//   - register: the SyncTarget, the grant of pkg/apiserver (LocationGrant) and the mapper's
//     credentials (a view kubeconfig for pull mode, the target kubeconfig Secret for push mode);
//   - verify: pkg/mapper/verify, as `mapper verify` runs it.
//
// Flags and output follow kubectl: --kubeconfig, --context and the other client flags of
// k8s.io/cli-runtime's ConfigFlags, -o wide|json|yaml through cli-runtime's printers. Exit
// status: 0 when the command did its work, 1 on an error, and for verify 2 when it found
// violations.
package kubectlmapper
