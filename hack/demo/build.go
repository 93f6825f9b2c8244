package main

import (
	"path/filepath"
	"time"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
	"github.com/cluster-mapper/cluster-mapper/test/framework/programtb"
)

// commands are the binaries the demo runs, built into bin/ as `make build` builds them, so that
// the commands the docs show (bin/mapper verify ..., kubectl mapper with bin/ on PATH) work
// after the demo.
var commands = []string{"mapper-apiserver", "mapper-controller", "mapper", "kubectl-mapper"}

// buildBinaries builds commands into dir (bin/) with the version stamp of `make build`, saying
// which one it builds (the first build of a clean checkout takes minutes), and returns their
// paths by name.
func buildBinaries(tb *programtb.TB, dir string) map[string]string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		tb.Fatal(err)
	}
	framework.SetBuildDir(abs)
	bins := map[string]string{}
	for _, c := range commands {
		start := time.Now()
		tb.Logf("building %s ...", filepath.Join(dir, c))
		bins[c] = framework.BuildBinary(tb, "./cmd/"+c)
		tb.Logf("  built %s in %s", filepath.Join(dir, c), time.Since(start).Round(100*time.Millisecond))
	}
	return bins
}
