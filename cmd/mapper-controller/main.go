// Command mapper-controller runs cluster-mapper's control plane controllers against the
// source (see pkg/controller/app and docs/locations.md).
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/cluster-mapper/cluster-mapper/pkg/buildversion"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/app"
)

func main() {
	cmd := app.NewCommand()
	buildversion.AddFlag(cmd)
	os.Exit(cli.Run(cmd))
}
