// Command render-artifacts writes the kustomize manifests of artifacts/ from the Helm charts of
// charts/ (one source of truth: the charts), and copies artifacts/crds, controller-gen's output,
// into charts/cluster-mapper/crds. hack/update-codegen.sh runs it (`make codegen`), and
// hack/verify-codegen.sh checks that its output is up to date (`make verify`).
//
//	go run ./hack/render-artifacts [-root .]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/cluster-mapper/cluster-mapper/test/charts"
)

func main() {
	root := flag.String("root", ".", "The repository root.")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "render-artifacts:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	files, err := charts.Artifacts(root)
	if err != nil {
		return err
	}
	stale, err := charts.StaleArtifacts(root, files)
	if err != nil {
		return err
	}
	for _, f := range stale {
		if err := os.Remove(filepath.Join(root, f)); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}
