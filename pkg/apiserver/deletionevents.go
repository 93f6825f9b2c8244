package apiserver

import (
	"os"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
)

// stillPending reports whether the object of p still waits for p.Location in c: the location's
// view holds the object with p's UID and shows it deleting. false while c is nil (not built yet).
func stillPending(c *cache.Cache, p cache.PendingDeletion) bool {
	if c == nil {
		return false
	}
	store, ok := c.Store(p.GVR)
	if !ok {
		return false
	}
	obj, _, found := store.GetInCluster(p.Location, p.Cluster, p.Namespace, p.Name)
	return found && obj.UID() == p.UID && obj.DeletionPending(p.Location)
}

// kindOf returns the apiVersion and kind of gvr's objects as c mirrors them ("" when c does
// not, or is nil).
func kindOf(c *cache.Cache, gvr schema.GroupVersionResource) (apiVersion, kind string) {
	if c == nil {
		return "", ""
	}
	for _, r := range c.Resources() {
		if r.GVR == gvr {
			return gvr.GroupVersion().String(), r.Kind
		}
	}
	return "", ""
}

// serverIdentity is the reportingInstance of the server's Events: its host name.
func serverIdentity() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "mapper-apiserver"
	}
	return h
}
