package framework

import (
	"strings"
)

// StartControllerManager runs the testenv's kube-controller-manager against cp with the
// admin's kubeconfig and returns its process, which is stopped (by its pid) when the test
// ends, or earlier by [Process.Stop]. It runs only controllers (default "deployment" and
// "replicaset": Deployments get ReplicaSets, Pods and a .status from the real controllers),
// without leader election, service-account credentials or a serving port. With no scheduler
// and no kubelet the Pods stay Pending: status.replicas and updatedReplicas are reported,
// readyReplicas and availableReplicas stay 0. It fails the test when the process cannot start.
func (cp *ControlPlane) StartControllerManager(t TB, controllers ...string) *Process {
	t.Helper()
	if len(controllers) == 0 {
		controllers = []string{"deployment", "replicaset"}
	}
	return StartProcess(t, ProcessSpec{
		Name: "kube-controller-manager-" + cp.Name,
		Path: binary(t, KubeControllerManagerBinary),
		Args: []string{
			"--kubeconfig=" + cp.AdminKubeconfig(),
			"--controllers=" + strings.Join(controllers, ","),
			"--leader-elect=false",
			"--use-service-account-credentials=false",
			"--secure-port=0",
			"-v=1",
		},
		LogDir: cp.Dir,
	})
}
