package framework

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// StreamKubectl runs the testenv's kubectl with --kubeconfig=kubeconfig and args until ctx ends
// (for long-running commands such as `get -w`) and sends every line it prints on stdout to
// lines. kubectl is killed when ctx ends; the returned error then is ctx's. Otherwise it is
// kubectl's own failure, with its command line.
func StreamKubectl(t TB, ctx context.Context, kubeconfig string, lines chan<- string, args ...string) error {
	args = append([]string{"--kubeconfig=" + kubeconfig}, args...)
	cmd := exec.CommandContext(ctx, KubectlPath(t), args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		select {
		case lines <- sc.Text():
		case <-ctx.Done():
		}
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}
