package clusterinformer

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// Clusters says how an Informer finds the logical cluster of an object.
type Clusters struct {
	// Default is the cluster of an object without a kcp.io/cluster annotation (of every object
	// when IgnoreAnnotation is set).
	Default string
	// IgnoreAnnotation makes Default the cluster of every object: a plain Kubernetes source is
	// one logical cluster, and a kcp.io/cluster annotation a user wrote there names nothing
	// (docs/design.md, "Names"). Unset, the annotation names the
	// cluster, as on a kcp source (kcp sets it and never changes it) and in location views
	// (which always set it).
	IgnoreAnnotation bool
}

// KeyFunc returns the cache.KeyFunc of an Informer's queue and store: the contract.Key of an
// object ("cluster|namespace/name", "cluster|name" when cluster-scoped), its cluster found as c
// says. It accepts what a DeltaFIFO hands it: *unstructured.Unstructured, any object with
// metadata (a typed object after a transform), cache.DeletedFinalStateUnknown and
// cache.ExplicitKey (whose keys already are contract.Keys). An object without metadata is an
// error.
func KeyFunc(c Clusters) cache.KeyFunc {
	return func(obj interface{}) (string, error) {
		switch o := obj.(type) {
		case cache.DeletedFinalStateUnknown:
			return o.Key, nil
		case cache.ExplicitKey:
			return string(o), nil
		case *unstructured.Unstructured:
			cluster := c.Default
			if !c.IgnoreAnnotation {
				// Read the annotation in place: GetAnnotations copies the whole map, on every key
				// computation of the queue and the store (BenchmarkViewStore in pkg/mapper).
				if a, _, _ := unstructured.NestedString(o.Object, "metadata", "annotations", contract.ClusterAnnotation); a != "" {
					cluster = a
				}
			}
			return string(contract.NewKey(cluster, o.GetNamespace(), o.GetName())), nil
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return "", fmt.Errorf("object has no meta: %v", err)
		}
		cluster := c.Default
		if a := m.GetAnnotations()[contract.ClusterAnnotation]; a != "" && !c.IgnoreAnnotation {
			cluster = a
		}
		return string(contract.NewKey(cluster, m.GetNamespace(), m.GetName())), nil
	}
}
