package placement

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/placement"
)

// BenchmarkCompatiblePool: the cost that compatibility adds to placing one group, over 1,000
// matching locations of which 10 lack one of the group's 3 resources.
func BenchmarkCompatiblePool(b *testing.B) {
	spec := controlv1alpha1.PlacementSpec{
		Resources:        []controlv1alpha1.ResourceRule{{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}},
		LocationSelector: &metav1.LabelSelector{},
	}
	policy, err := placement.Compile(&spec)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	locs := make([]placement.Location, 1000)
	var unserved []placement.Location
	for i := range locs {
		locs[i] = placement.Location{Name: fmt.Sprintf("loc-%04d", i), Ready: true, Since: t0}
		if i%100 == 0 {
			locs[i].Unserved = map[string]string{"gadgets.example.com": controlv1alpha1.ReasonTargetLacksResource}
			unserved = append(unserved, locs[i])
		}
	}
	pool := policy.Pool(locs, nil, t0.Add(time.Hour))
	resources := sets.New("deployments.apps", "configmaps", "gadgets.example.com")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		e := &entry{pool: pool, unserved: unserved}
		e.compatiblePool(resources)
	}
}
