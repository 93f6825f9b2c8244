// Package framework runs real control planes for cluster-mapper's end-to-end tests.
//
// It starts etcd and kube-apiserver binaries built by hack/install-testenv.sh (see
// [BinDir]) as child processes of the test, each listening on free loopback ports, with
// everything a real cluster has that the project depends on: TLS serving with a generated
// CA, client-certificate users (an admin in system:masters and any number of further users,
// see [ControlPlane.NewUser]), RBAC authorization, service-account signing keys and the
// aggregation layer (front-proxy CA and proxy client certificate, see [FrontProxy]).
//
// A typical test:
//
//	source := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source"})
//	client := source.Admin().Client(t)
//	// ... use client, source.AdminKubeconfig(), framework.RunKubectl(...)
//
// Every process is stopped by its own process group in t.Cleanup (SIGTERM, then SIGKILL
// after [StopTimeout]), also when the test fails or panics, and is additionally started with
// a parent-death signal so that it dies with the test binary even when cleanups cannot run
// (for example on a `go test -timeout` panic). [AssertStopped] checks that a set of pids is
// really gone.
//
// There is no kube-controller-manager, scheduler or kubelet: namespaces are not finalized,
// garbage collection does not run, the aggregated ClusterRoles (admin, edit, view) have no
// rules, and the ServiceAccount admission plugin is disabled so that pods can be created
// without a token controller. RBAC picks up new bindings through an informer, so a test that
// grants a permission should poll until it takes effect.
package framework
