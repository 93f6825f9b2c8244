package placement

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// BenchmarkDecide measures one object's decision among 1,000 matching locations (the design
// scale: 1,000 SyncTargets), for Duplicate over 2 and Divide over all.
func BenchmarkDecide(b *testing.B) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	locs := make([]Location, 1000)
	for i := range locs {
		locs[i] = loc(fmt.Sprintf("location-%04d", i), true, t0, "tier", "edge")
	}
	for _, tc := range []struct {
		name string
		spec controlv1alpha1.PlacementSpec
	}{
		{"Duplicate2of1000", controlv1alpha1.PlacementSpec{NumberOfLocations: ptr.To[int32](2)}},
		{"Divide10over1000", controlv1alpha1.PlacementSpec{Replicas: controlv1alpha1.ReplicasDivide}},
		{"Duplicate2of1000Unchanged", controlv1alpha1.PlacementSpec{NumberOfLocations: ptr.To[int32](2)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tc.spec.Resources = []controlv1alpha1.ResourceRule{{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}}
			tc.spec.LocationSelector = &metav1.LabelSelector{}
			p, err := Compile(&tc.spec)
			if err != nil {
				b.Fatal(err)
			}
			pool := p.Pool(locs, nil, t0.Add(time.Hour))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				var current []string
				if tc.name == "Duplicate2of1000Unchanged" {
					current = []string{"location-0001", "location-0002"} // a re-reconcile: already placed
				}
				d := p.Decide(fmt.Sprintf("deployments.apps//ns/o%d", i), current, 10, pool)
				if len(d.Locations) == 0 {
					b.Fatal("no locations")
				}
			}
		})
	}
}
