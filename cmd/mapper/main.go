// Command mapper maps one location's view of mapper-apiserver onto a target cluster, and with
// `mapper verify` compares the two (docs/mapper.md).
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/cluster-mapper/cluster-mapper/pkg/buildversion"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper/app"
)

func main() {
	cmd := app.NewCommand()
	buildversion.AddFlag(cmd)
	os.Exit(cli.Run(cmd))
}
