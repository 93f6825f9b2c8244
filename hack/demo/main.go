// Command demo runs cluster-mapper locally on real servers, every part of it: etcd, a source
// kube-apiserver and one target kube-apiserver per location (east, west), each with
// kube-controller-manager; the demo workloads, Placement, Customization and StatusCollector in the
// source; mapper-apiserver serving each location its view, registered with the source's
// aggregator (APIService v1alpha1.mapper.kcp.io); mapper-controller; and for every location a
// mapper that keeps its target equal to its view (docs/design.md, "Invariants") and writes status
// back. Each mapper identity gets exactly the rules of `mapper-apiserver grant`.
//
// It builds the binaries into bin/ (as `make build`, so the commands the docs show work), says
// what it does while it starts, prints the locations' health and commands to try, and on Ctrl-C
// stops every process it started (by pid) and removes its temporary directory.
//
// Run it with `make demo` (which builds the testenv first).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
	"github.com/cluster-mapper/cluster-mapper/test/framework/programtb"
)

var locations = []string{"east", "west"}

// locationLabels are the SyncTargets' labels (the locations' properties).
var locationLabels = map[string]map[string]string{
	"east": {"region": "us-east", "tier": "edge"},
	"west": {"region": "us-west", "tier": "core"},
}

// mirrored are the resources mapper-apiserver mirrors (--resources): only these are in the views
// and so on the targets; everything else in the source (Pods, ReplicaSets, the control objects)
// is not.
var mirrored = []string{"configmaps", "secrets", "services", "serviceaccounts", "deployments.apps"}

func main() {
	dir := flag.String("dir", ".demo", "Directory for the kubeconfigs the demo writes.")
	binDir := flag.String("bin-dir", "bin", "Directory the demo builds its binaries into (as `make build`).")
	workloads := flag.String("workloads", "hack/demo/workloads.yaml", "Manifests applied to the source cluster.")
	placements := flag.String("placements", "hack/demo/placements.yaml", "Placements applied to the source cluster once the CRDs are installed.")
	bindings := flag.String("bindings", "hack/demo/bindings.yaml", "LocationBindings applied to the source cluster once the CRDs are installed (docs/tenancy.md).")
	flag.Parse()
	if err := run(*dir, *binDir, *workloads, *placements, *bindings); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(dir, binDir, workloads, placements, bindings string) error {
	// Ctrl-C from here on stops everything: the signal is only read once the demo runs, so an
	// interrupt while it starts is held until then, and a second one does not cut the cleanup.
	stop := make(chan os.Signal, 2)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)

	tb, err := programtb.New("")
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("stopping every process the demo started and removing its temporary directory ...")
		tb.Close()
		fmt.Println("stopped.")
	}()
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	out, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	ctx := context.Background()

	bins := buildBinaries(tb, binDir)
	c := startClusters(tb)
	source := c.source
	applyManifests(tb, source, workloads, "hack/demo/services-secrets.yaml")

	tb.Logf("registering the locations as SyncTargets (the CRDs of artifacts/crds), starting mapper-controller ...")
	registerLocations(tb, ctx, source)
	// Both servers in the Bound location-access mode, their default (docs/tenancy.md): the
	// LocationBindings of bindings say which locations each namespace may use.
	framework.StartMapperController(tb, ctx, source, locationGracePeriod, "--location-access=Bound", "--unbound-report-resources=configmaps,deployments.apps")
	applyManifests(tb, source, bindings, placements, "hack/demo/customizations.yaml", "hack/demo/statuscollectors.yaml")

	tb.Logf("starting mapper-apiserver (mirroring %v), registering the APIService ...", mirrored)
	api := framework.StartAggregatedMapperAPIServer(tb, source, "--resources="+strings.Join(mirrored, ","), "--location-access=Bound")
	server := api.Server

	admin := source.Admin()
	copyFile(tb, source.AdminKubeconfig(), filepath.Join(out, "source.kubeconfig"))
	copyFile(tb, admin.KubeconfigFor(tb, server.URL, server.ServingCA.CertPEM), filepath.Join(out, "mapper-apiserver.kubeconfig"))
	mappers := map[string]*framework.Process{}
	for _, loc := range locations {
		copyFile(tb, admin.KubeconfigFor(tb, server.ViewURL(loc), server.ServingCA.CertPEM), filepath.Join(out, loc+".kubeconfig"))
		writeMapperKubeconfig(tb, source, loc, filepath.Join(out, "mapper-"+loc+".kubeconfig"))
		copyFile(tb, c.targets[loc].AdminKubeconfig(), filepath.Join(out, "target-"+loc+".kubeconfig"))
		tb.Logf("starting the mapper of %s (bin/mapper) ...", loc)
		mappers[loc] = startMapper(tb, bins["mapper"], loc, filepath.Join(out, "mapper-"+loc+".kubeconfig"), filepath.Join(out, "target-"+loc+".kubeconfig"))
	}
	tb.Logf("waiting for every location's mapper to report Ready ...")
	health := locationHealth(tb, ctx, source)

	printUsage(os.Stdout, usage{
		health: health, source: source.URL, server: server.URL,
		eastView: server.ViewURL("east"), eastAggregated: api.ViewURL("east"), westAggregated: api.ViewURL("west"),
		kubectl: framework.KubectlPath(tb), dir: out, mapper: relative(root, bins["mapper"]), pluginDir: filepath.Dir(bins["kubectl-mapper"]),
		mappers: mappers, grace: locationGracePeriod, mirrored: mirrored,
	})

	<-stop
	fmt.Println()
	return nil
}

// copyFile copies a kubeconfig the framework wrote to a stable path for the user.
func copyFile(tb *programtb.TB, from, to string) {
	b, err := os.ReadFile(from)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// relative returns path relative to dir when it is below it (bin/mapper), else path.
func relative(dir, path string) string {
	if rel, err := filepath.Rel(dir, path); err == nil && filepath.IsLocal(rel) {
		return rel
	}
	return path
}
