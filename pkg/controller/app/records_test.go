package app

import (
	"slices"
	"testing"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
)

// TestBoundLocationsOfAPlainSource: the status record controller names a plain source's
// logical cluster ("default"), the binding Tracker keys its bindings by their kcp.io/cluster
// annotation, which a plain source's objects lack (""). The filter must find web's binding
// anyway: it once found none, so every location looked unbound and mapper-controller removed
// every status record of the namespace (TestDemo: web/frontend's summed status never came).
// On a kcp source both name the logical cluster.
func TestBoundLocationsOfAPlainSource(t *testing.T) {
	index := func(cluster string) func() *locationbinding.Index {
		b := locationbinding.Compile(locationbinding.Key{Cluster: cluster, Namespace: "web", Name: "east"},
			&controlv1alpha1.LocationBindingSpec{LocationNames: []string{"east"}})
		x := locationbinding.NewIndex([]*locationbinding.Binding{b}, []locationbinding.Location{{Name: "east"}, {Name: "west"}})
		return func() *locationbinding.Index { return x }
	}
	assigned := []string{"east", "west"}
	if got := boundLocations(false, index(""))("default", "web", assigned); !slices.Equal(got, []string{"east"}) {
		t.Errorf("plain source: bound %v, want [east]", got)
	}
	if got := boundLocations(true, index("root:org"))("root:org", "web", assigned); !slices.Equal(got, []string{"east"}) {
		t.Errorf("kcp source: bound %v, want [east]", got)
	}
	if got := boundLocations(false, func() *locationbinding.Index { return nil })("default", "web", assigned); !slices.Equal(got, assigned) {
		t.Errorf("Open mode: bound %v, want every location", got)
	}
}
