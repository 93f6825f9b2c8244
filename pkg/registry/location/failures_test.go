package location

import (
	"errors"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
)

// TestCustomizationFailures: the cache's render failures become, per location, the failures of
// each Customization (its count and its first ones by resource, namespace and name); an
// object's own patch failing is not a Customization's.
func TestCustomizationFailures(t *testing.T) {
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	failure := func(location, customizationName, name string) cache.RenderFailure {
		return cache.RenderFailure{GVR: deployments, Cluster: "default", Namespace: "apps", Name: name, Location: location,
			Err: &customization.RenderError{Customization: customizationName, Namespace: "apps", Cluster: "default",
				Field: "spec.mutations[0]", Reason: customization.ReasonMutationFailed, Err: errors.New("no such key: zone")}}
	}
	var failures []cache.RenderFailure
	for i := 12; i > 0; i-- {
		failures = append(failures, failure("east", "zone", fmt.Sprintf("web-%02d", i)))
	}
	failures = append(failures, failure("west", "zone", "web-05"), failure("east", "arch", "db"),
		cache.RenderFailure{GVR: deployments, Namespace: "apps", Name: "own", Location: "east",
			Err: &customization.RenderError{Reason: customization.ReasonMutationFailed, Err: errors.New("its own patch")}})

	got := customizationFailures(failures)
	east := got["east"]
	if len(east) != 2 || east[0].Name != "arch" || east[1].Name != "zone" {
		t.Fatalf("east: %+v, want arch then zone", east)
	}
	zone := east[1]
	if zone.Cluster != "default" || zone.Namespace != "apps" || zone.FailingObjects != 12 || len(zone.Failures) != v1alpha1.MaxRenderFailures {
		t.Fatalf("east's zone: %s|%s, %d failing, %d listed; want default|apps, 12, %d", zone.Cluster, zone.Namespace, zone.FailingObjects, len(zone.Failures), v1alpha1.MaxRenderFailures)
	}
	if f := zone.Failures[0]; f.Resource != "deployments.apps" || f.Name != "web-01" || f.Reason != customization.ReasonMutationFailed || f.Message != "spec.mutations[0]: no such key: zone" {
		t.Errorf("first failure %+v", f)
	}
	if west := got["west"]; len(west) != 1 || west[0].FailingObjects != 1 || west[0].Failures[0].Name != "web-05" {
		t.Errorf("west: %+v", west)
	}
}
