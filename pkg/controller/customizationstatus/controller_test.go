package customizationstatus

import (
	"fmt"
	"testing"

	mapperv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
)

// TestFailuresOf: the failures of a Customization over all Locations: the counts add up, and
// the failures each location lists (its first ones) are all kept, with their location.
func TestFailuresOf(t *testing.T) {
	location := func(name string, n int) *mapperv1alpha1.Location {
		l := &mapperv1alpha1.Location{}
		l.Name = name
		cf := mapperv1alpha1.CustomizationFailures{Cluster: "default", Namespace: "apps", Name: "zone", FailingObjects: int64(n)}
		for i := 0; i < min(n, mapperv1alpha1.MaxRenderFailures); i++ {
			cf.Failures = append(cf.Failures, mapperv1alpha1.RenderFailure{Resource: "deployments.apps", Namespace: "apps", Name: fmt.Sprintf("web-%02d", i), Reason: "MutationFailed"})
		}
		l.Status.CustomizationFailures = []mapperv1alpha1.CustomizationFailures{cf}
		return l
	}
	got := failuresOf([]interface{}{location("east", 12), location("west", 3), &mapperv1alpha1.Location{}})
	zone := got[customization.RuleKey{Cluster: "default", Namespace: "apps", Name: "zone"}]
	if len(got) != 1 || zone.Count != 15 || len(zone.Some) != 13 {
		t.Fatalf("failures %+v; want zone with 15 failing and 13 listed", got)
	}
	locations := map[string]int{}
	for _, f := range zone.Some {
		locations[f.Location]++
	}
	if locations["east"] != 10 || locations["west"] != 3 {
		t.Errorf("listed per location %v, want east 10, west 3", locations)
	}
}
