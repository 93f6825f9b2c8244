package framework

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// KubectlTimeout bounds a single [RunKubectl] invocation.
var KubectlTimeout = 2 * time.Minute

// RunKubectl runs the testenv's kubectl with --kubeconfig=kubeconfig and args and returns its
// stdout. The error, when kubectl fails or exceeds [KubectlTimeout], includes the command line
// and kubectl's stderr. It skips or fails the test as [BinDir] does when kubectl is missing.
func RunKubectl(t TB, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	stdout, _, err := RunKubectlWithStderr(t, kubeconfig, args...)
	return stdout, err
}

// RunKubectlWithStderr is [RunKubectl], also returning kubectl's stderr (its warnings, for
// instance) when it succeeds.
func RunKubectlWithStderr(t TB, kubeconfig string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), KubectlTimeout)
	defer cancel()
	args = append([]string{"--kubeconfig=" + kubeconfig}, args...)
	cmd := exec.CommandContext(ctx, KubectlPath(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), stderr.String(), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), stderr.String(), nil
}
