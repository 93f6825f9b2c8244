// Command demo runs cluster-mapper locally on real servers: etcd and a source kube-apiserver
// from the testenv, demo workloads assigned to the locations east and west, and a
// mapper-apiserver serving each location its view, registered with the kube-apiserver's
// aggregator (APIService v1alpha1.mapper.kcp.io). For each location it creates a mapper identity
// allowed only that location's view and writes two kubeconfigs: the admin's, straight to
// mapper-apiserver, and the mapper's, through the aggregator (made as `mapper-apiserver
// kubeconfig` makes them). It also starts a target kube-apiserver for east and a mapper that keeps
// it equal to east's view (invariants 1-4 of DESIGN.md). Both locations are registered as
// SyncTargets (the CRDs of artifacts/crds); each mapper identity gets exactly the rules of
// `mapper-apiserver grant` (its view, its Lease, its SyncTarget's status); mapper-controller
// marks a location whose Lease is not renewed Ready=Unknown (west has no mapper). It prints the
// locations' health and kubectl commands to try, and stops every process it started on Ctrl-C.
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
	"syscall"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/cluster-mapper/cluster-mapper/pkg/apiserver"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
	"github.com/cluster-mapper/cluster-mapper/test/framework/programtb"
)

var locations = []string{"east", "west"}

// locationLabels are the SyncTargets' labels (the locations' properties).
var locationLabels = map[string]map[string]string{
	"east": {"region": "us-east", "tier": "edge"},
	"west": {"region": "us-west", "tier": "core"},
}

func main() {
	dir := flag.String("dir", ".demo", "Directory for the kubeconfigs the demo writes.")
	workloads := flag.String("workloads", "hack/demo/workloads.yaml", "Manifests applied to the source cluster.")
	placements := flag.String("placements", "hack/demo/placements.yaml", "Placements applied to the source cluster once the CRDs are installed.")
	bindings := flag.String("bindings", "hack/demo/bindings.yaml", "LocationBindings applied to the source cluster once the CRDs are installed (docs/tenancy.md).")
	flag.Parse()

	tb, err := programtb.New("")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer tb.Close()
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	out, err := filepath.Abs(*dir)
	if err != nil {
		tb.Fatal(err)
	}

	tb.Logf("starting etcd, the source kube-apiserver and east's target kube-apiserver ...")
	planes := framework.StartControlPlanes(tb, framework.ControlPlaneOptions{Name: "source"}, framework.ControlPlaneOptions{Name: "target-east"})
	source, target := planes[0], planes[1]
	if _, err := framework.RunKubectl(tb, source.AdminKubeconfig(), "apply", "-f", *workloads); err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	tb.Logf("registering the locations as SyncTargets, starting mapper-controller ...")
	registerLocations(tb, ctx, source)
	framework.StartMapperController(tb, ctx, source, locationGracePeriod, "--location-access=Bound", "--unbound-report-resources=configmaps,deployments.apps")
	if _, err := framework.RunKubectl(tb, source.AdminKubeconfig(), "apply", "-f", *bindings, "-f", *placements); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("building and starting mapper-apiserver, registering the APIService ...")
	api := framework.StartAggregatedMapperAPIServer(tb, source, "--resources=configmaps,secrets,services,serviceaccounts,deployments.apps", "--location-access=Bound")
	server := api.Server

	admin := source.Admin()
	copyFile(tb, source.AdminKubeconfig(), filepath.Join(out, "source.kubeconfig"))
	copyFile(tb, admin.KubeconfigFor(tb, server.URL, server.ServingCA.CertPEM), filepath.Join(out, "mapper-apiserver.kubeconfig"))
	for _, loc := range locations {
		copyFile(tb, admin.KubeconfigFor(tb, server.ViewURL(loc), server.ServingCA.CertPEM), filepath.Join(out, loc+".kubeconfig"))
		writeMapperKubeconfig(tb, source, loc, filepath.Join(out, "mapper-"+loc+".kubeconfig"))
	}

	copyFile(tb, target.AdminKubeconfig(), filepath.Join(out, "target-east.kubeconfig"))
	tb.Logf("building and starting the mapper for east ...")
	mapperLog := startMapper(tb, filepath.Join(out, "mapper-east.kubeconfig"), filepath.Join(out, "target-east.kubeconfig"))
	tb.Logf("waiting for east's mapper to report Ready and for west (no mapper) to be Unknown ...")
	health := locationHealth(tb, ctx, source)

	kubectl := framework.KubectlPath(tb)
	fmt.Printf("\nLocations (SyncTargets in the source; east's mapper renews its Lease, west has none):\n%s", health)
	fmt.Printf(`
cluster-mapper demo is running.
  source kube-apiserver:  %s
  mapper-apiserver:       %s
  east's view:            %s
  through the aggregator: %s

Try (kubectl from the testenv):
  K=%[5]s
  $K --kubeconfig %[6]s/east.kubeconfig get deployments -A
  $K --kubeconfig %[6]s/west.kubeconfig get configmaps -A
  $K --kubeconfig %[6]s/east.kubeconfig get deployments -A -w
      # and in another shell, re-assign an object in the source:
  $K --kubeconfig %[6]s/source.kubeconfig annotate -n shop deployment checkout --overwrite kcp.io/assigned-locations='["west"]'
  $K --kubeconfig %[6]s/mapper-apiserver.kubeconfig get locations
  $K --kubeconfig %[6]s/source.kubeconfig get locationbindings -A
      # which locations each namespace may use (hack/demo/bindings.yaml, docs/tenancy.md)
  $K --kubeconfig %[6]s/source.kubeconfig get synctargets -o wide -w
      # and stop east's mapper (kill -9 its pid): Ready=Unknown within the grace period (%[10]s)
  $K --kubeconfig %[6]s/source.kubeconfig get placements -A
  $K --kubeconfig %[6]s/east.kubeconfig get deployments -n web -o custom-columns=NAME:.metadata.name,REPLICAS:.spec.replicas -w
      # web's Deployments are divided by a Placement over the Ready locations; west has never
      # been Ready (no mapper), so east runs them all (docs/placement.md)
  $K --kubeconfig %[6]s/source.kubeconfig get deployments,configmaps,secrets,serviceaccounts,services -n blog -o custom-columns=KIND:.kind,NAME:.metadata.name,LOCATIONS:.metadata.annotations.kcp\.io/assigned-locations
      # blog's Placement selects only its Deployment; the rest of the application follows it:
      # every object of the app on the same location (docs/dependencies.md)

Through the kube-apiserver aggregator, as the mapper of each location (allowed only its own view):
  $K --kubeconfig %[6]s/source.kubeconfig get apiservice v1alpha1.mapper.kcp.io
  $K --kubeconfig %[6]s/source.kubeconfig get locations
  $K --kubeconfig %[6]s/mapper-east.kubeconfig get deployments -A
  $K --kubeconfig %[6]s/mapper-west.kubeconfig get configmaps -A -w
  $K --kubeconfig %[6]s/mapper-east.kubeconfig --server %[7]s get --raw /apis/apps/v1/deployments
      # Forbidden: west is not east's. (A plain "get deployments" stops at kubectl's discovery,
      # which prints the 403 as "unknown"; --raw shows the server's message.)

East's target cluster, kept equal to east's view by the mapper (its log: %[8]s):
  $K --kubeconfig %[6]s/target-east.kubeconfig get deployments,configmaps -A -l kcp.io/location=east
  $K --kubeconfig %[6]s/target-east.kubeconfig get configmaps -A -l kcp.io/location=east -w
      # and in another shell, assign a ConfigMap to east or take one away:
  $K --kubeconfig %[6]s/source.kubeconfig annotate -n web configmap frontend-config --overwrite kcp.io/assigned-locations='["east","west"]'
  $K --kubeconfig %[6]s/source.kubeconfig annotate -n shop configmap catalog --overwrite kcp.io/assigned-locations='["west"]'
      # and compare the view with the target, per invariant:
  %[9]s verify --view-kubeconfig=%[6]s/mapper-east.kubeconfig --target-kubeconfig=%[6]s/target-east.kubeconfig

Press Ctrl-C to stop everything.
`, source.URL, server.URL, server.ViewURL("east"), api.ViewURL("east"), kubectl, out, api.ViewURL("west"), mapperLog, framework.BuildBinary(tb, "./cmd/mapper"), locationGracePeriod)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	fmt.Println("\nstopping ...")
}

// startMapper builds the mapper and runs it for east's view (through the aggregator, as the
// mapper-east identity) onto east's target cluster. It returns the path of the mapper's log.
func startMapper(tb *programtb.TB, viewKubeconfig, targetKubeconfig string) string {
	port, err := framework.FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	p := framework.StartProcess(tb, framework.ProcessSpec{
		Name: "mapper-east",
		Path: framework.BuildBinary(tb, "./cmd/mapper"),
		Args: []string{
			"--view-kubeconfig=" + viewKubeconfig,
			"--target-kubeconfig=" + targetKubeconfig,
			fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port),
			"--discovery-interval=5s",
			"--orphan-sweep-interval=30s",
		},
	})
	return p.LogPath
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

// writeMapperKubeconfig creates the user mapper-<location>, grants it what `mapper-apiserver
// grant --location=<location> --user=mapper-<location> --apply` grants (apiserver.LocationGrant:
// locations/proxy of location only, its Lease, its SyncTarget's status), and writes to path its
// kubeconfig for location's view through the aggregator, derived from the user's kubeconfig of
// the source by apiserver.LocationKubeconfig (what `mapper-apiserver kubeconfig` prints).
func writeMapperKubeconfig(tb *programtb.TB, source *framework.ControlPlane, location, path string) {
	user := source.NewUser(tb, "mapper-"+location)
	subjects, err := apiserver.GrantSubjects([]string{user.Name}, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	grant, err := apiserver.LocationGrant(location, subjects)
	if err != nil {
		tb.Fatal(err)
	}
	if err := apiserver.ApplyGrant(context.Background(), source.Admin().Client(tb), grant, false); err != nil {
		tb.Fatal(err)
	}
	raw, err := clientcmd.LoadFromFile(user.KubeconfigPath)
	if err != nil {
		tb.Fatal(err)
	}
	cfg, err := apiserver.LocationKubeconfig(*raw, "", location)
	if err != nil {
		tb.Fatal(err)
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		tb.Fatal(err)
	}
}
