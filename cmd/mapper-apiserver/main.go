// Command mapper-apiserver is the aggregated API server that keeps one indexed cache of a
// source API server and serves each location a view holding only that location's objects
// (docs/design.md).
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/cluster-mapper/cluster-mapper/pkg/apiserver"
	"github.com/cluster-mapper/cluster-mapper/pkg/buildversion"
)

func main() {
	cmd := apiserver.NewCommand()
	buildversion.AddFlag(cmd)
	os.Exit(cli.Run(cmd))
}
