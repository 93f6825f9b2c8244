package main

import (
	"context"
	"fmt"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/cluster-mapper/cluster-mapper/pkg/apiserver"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
	"github.com/cluster-mapper/cluster-mapper/test/framework/programtb"
)

// startMapper runs bin/mapper for location's view (through the aggregator, as the identity
// mapper-<location>) onto its target cluster, registered (it renews the location's Lease and
// writes its SyncTarget's status). It returns the process.
func startMapper(tb *programtb.TB, bin, location, viewKubeconfig, targetKubeconfig string) *framework.Process {
	port, err := framework.FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	return framework.StartProcess(tb, framework.ProcessSpec{
		Name: "mapper-" + location,
		Path: bin,
		Args: []string{
			"--view-kubeconfig=" + viewKubeconfig,
			"--target-kubeconfig=" + targetKubeconfig,
			fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port),
			"--discovery-interval=5s",
			"--orphan-sweep-interval=30s",
		},
	})
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
