package main

import (
	"github.com/cluster-mapper/cluster-mapper/test/framework"
	"github.com/cluster-mapper/cluster-mapper/test/framework/programtb"
)

// sourceControllers are the kube-controller-manager controllers of the source: namespaces are
// finalized (a deleted namespace goes away) and dependents are garbage collected. Not the
// workload controllers: the source's Deployments are templates; their status comes from the
// locations (docs/status.md).
var sourceControllers = []string{"namespace", "garbagecollector"}

// targetControllers are those of every target: Deployments get ReplicaSets, Pods and a .status
// (replicas, updatedReplicas; with no scheduler or kubelet the Pods stay Pending, so readyReplicas
// stays 0), which the mappers write back to the source.
var targetControllers = []string{"deployment", "replicaset", "garbagecollector", "namespace"}

// clusters are the demo's control planes: the source and one target per location.
type clusters struct {
	source  *framework.ControlPlane
	targets map[string]*framework.ControlPlane
}

// startClusters starts etcd and kube-apiserver for the source and for every location's target,
// then kube-controller-manager for each.
func startClusters(tb *programtb.TB) *clusters {
	opts := []framework.ControlPlaneOptions{{Name: "source"}}
	for _, loc := range locations {
		opts = append(opts, framework.ControlPlaneOptions{Name: "target-" + loc})
	}
	tb.Logf("starting etcd and kube-apiserver for the source and the targets of %v ...", locations)
	planes := framework.StartControlPlanes(tb, opts...)
	c := &clusters{source: planes[0], targets: map[string]*framework.ControlPlane{}}
	for i, loc := range locations {
		c.targets[loc] = planes[i+1]
	}
	tb.Logf("starting kube-controller-manager: the source's (%v) and every target's (%v) ...", sourceControllers, targetControllers)
	c.source.StartControllerManager(tb, sourceControllers...)
	for _, loc := range locations {
		c.targets[loc].StartControllerManager(tb, targetControllers...)
	}
	return c
}
