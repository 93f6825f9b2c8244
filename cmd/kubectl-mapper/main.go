// Command kubectl-mapper is the kubectl plugin of cluster-mapper: installed on PATH (go install
// ./cmd/kubectl-mapper), kubectl runs it as `kubectl mapper`. It lists locations, tells where an
// object is and why it failed there, registers a location, and verifies one (docs/day2.md).
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/cluster-mapper/cluster-mapper/pkg/buildversion"
	"github.com/cluster-mapper/cluster-mapper/pkg/kubectlmapper"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	cmd := kubectlmapper.NewCommand(streams)
	buildversion.AddFlag(cmd)
	os.Exit(kubectlmapper.Run(cmd, streams))
}
