package main

import (
	"path/filepath"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
	"github.com/cluster-mapper/cluster-mapper/test/framework/programtb"
)

// applyManifests applies each file to cp with kubectl, in order, saying which.
func applyManifests(tb *programtb.TB, cp *framework.ControlPlane, files ...string) {
	for _, f := range files {
		tb.Logf("kubectl apply -f %s", filepath.Clean(f))
		if out, err := framework.RunKubectl(tb, cp.AdminKubeconfig(), "apply", "-f", f); err != nil {
			tb.Fatalf("applying %s: %v\n%s", f, err, out)
		}
	}
}
