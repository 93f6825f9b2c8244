// Package buildversion gives cluster-mapper's commands the `--version` flag. The version is the
// one `make build` and `make images` stamp into k8s.io/component-base/version with
// hack/version-ldflags.sh (`git describe` of the nearest v* tag, or v0.0.0-g<commit>), the same
// string the images carry in their org.opencontainers.image.version label (docs/install.md,
// "Images") and mapper-apiserver serves at /version.
package buildversion

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/component-base/version"
)

// AddFlag sets cmd.Version from k8s.io/component-base/version, which makes cobra add the flag
// `--version` to cmd. `<command> --version` then prints one line and exits 0:
//
//	mapper-apiserver v0.0.0-g0123456789ab (commit <40 hex digits>, tree clean, built 2026-01-02T03:04:05Z, go1.26.8)
//
// The first word after the command name is the gitVersion alone, so a script can compare it with
// an image's version label. An unstamped build (plain `go build`) prints
// v0.0.0-master+$Format:%H$, component-base's default.
func AddFlag(cmd *cobra.Command) {
	info := version.Get()
	cmd.Version = info.GitVersion
	cmd.SetVersionTemplate(fmt.Sprintf("{{.Name}} {{.Version}} (commit %s, tree %s, built %s, %s)\n",
		info.GitCommit, info.GitTreeState, info.BuildDate, info.GoVersion))
}
