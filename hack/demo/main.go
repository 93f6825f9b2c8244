// Command demo runs cluster-mapper locally on real servers: etcd and a source kube-apiserver
// from the testenv, demo workloads assigned to the locations east and west, and a
// mapper-apiserver serving each location its view. It writes a kubeconfig per location, prints
// kubectl commands to try, and stops every process it started on Ctrl-C.
//
// Run it with `make demo` (which builds the testenv first).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
	"github.com/cluster-mapper/cluster-mapper/test/framework/programtb"
)

var locations = []string{"east", "west"}

func main() {
	dir := flag.String("dir", ".demo", "Directory for the kubeconfigs the demo writes.")
	workloads := flag.String("workloads", "hack/demo/workloads.yaml", "Manifests applied to the source cluster.")
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

	tb.Logf("starting etcd and the source kube-apiserver ...")
	source := framework.StartControlPlane(tb, framework.ControlPlaneOptions{Name: "source"})
	if _, err := framework.RunKubectl(tb, source.AdminKubeconfig(), "apply", "-f", *workloads); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("building and starting mapper-apiserver ...")
	server := framework.StartMapperAPIServer(tb, source, "--resources=configmaps,deployments.apps")

	admin := source.Admin()
	copyFile(tb, source.AdminKubeconfig(), filepath.Join(out, "source.kubeconfig"))
	copyFile(tb, admin.KubeconfigFor(tb, server.URL, server.ServingCA.CertPEM), filepath.Join(out, "mapper-apiserver.kubeconfig"))
	for _, loc := range locations {
		copyFile(tb, admin.KubeconfigFor(tb, server.ViewURL(loc), server.ServingCA.CertPEM), filepath.Join(out, loc+".kubeconfig"))
	}

	kubectl := framework.KubectlPath(tb)
	fmt.Printf(`
cluster-mapper demo is running.
  source kube-apiserver:  %s
  mapper-apiserver:       %s
  east's view:            %s

Try (kubectl from the testenv):
  K=%s
  $K --kubeconfig %[5]s/east.kubeconfig get deployments -A
  $K --kubeconfig %[5]s/west.kubeconfig get configmaps -A
  $K --kubeconfig %[5]s/east.kubeconfig get deployments -A -w
      # and in another shell, re-assign an object in the source:
  $K --kubeconfig %[5]s/source.kubeconfig annotate -n shop deployment checkout --overwrite kcp.io/assigned-locations='["west"]'
  $K --kubeconfig %[5]s/mapper-apiserver.kubeconfig get locations

Press Ctrl-C to stop everything.
`, source.URL, server.URL, server.ViewURL("east"), kubectl, out)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	fmt.Println("\nstopping ...")
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
