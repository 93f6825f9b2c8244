package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
)

var (
	mapperSecretsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	mapperServicesGVR = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	// mappedGVRs are the resources the mapper tests fill.
	mappedGVRs = []schema.GroupVersionResource{configMapsGVR, mapperSecretsGVR, mapperServicesGVR, deploymentsGVR, widgetsGVR}
)

// Labels and annotations every fixture carries, so that a step can remove them upstream.
const (
	fixtureTierLabel       = "app.example.com/tier"
	fixtureOwnerAnnotation = "note.example.com/owner"
)

func newMapperSecret(ns, name string, locations ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]interface{}{"name": name, "namespace": ns},
		"type":     "Opaque",
		"data":     map[string]interface{}{"password": "c2VjcmV0"},
	}}
	setAssignment(u, locations...)
	return u
}

func newMapperService(ns, name string, locations ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]interface{}{"name": name, "namespace": ns},
		"spec": map[string]interface{}{
			"selector": map[string]interface{}{"app": name},
			"ports":    []interface{}{map[string]interface{}{"name": "http", "port": int64(80), "targetPort": int64(8080)}},
		},
	}}
	setAssignment(u, locations...)
	return u
}

// decorateFixture adds the fixture label and annotation, and the status opt-in when reflect is set.
func decorateFixture(u *unstructured.Unstructured, reflect bool) *unstructured.Unstructured {
	l := u.GetLabels()
	l[fixtureTierLabel] = "web"
	u.SetLabels(l)
	a := u.GetAnnotations()
	a[fixtureOwnerAnnotation] = "team"
	if reflect {
		a[contract.StatusPolicyAnnotation] = contract.StatusPolicyReflect
	}
	u.SetAnnotations(a)
	return u
}

// mapperFixtureNamespaces are the source namespaces of the mapper tests.
var mapperFixtureNamespaces = []string{"team-a", "team-b", "team-c", "team-d"}

// createMapperFixtures creates 125 objects in each fixture namespace (40 ConfigMaps, 25 Secrets, 20
// Services, 20 Deployments, 20 Widgets: 500 in all), each assigned to a random subset of
// locations; every fourth Deployment and Widget opts in to status reflection.
func createMapperFixtures(t *testing.T, ctx context.Context, src dynamic.Interface, locations []string) {
	t.Helper()
	r := rand.New(rand.NewSource(6))
	create := func(gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
		if _, err := src.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s %s/%s: %v", gvr.Resource, u.GetNamespace(), u.GetName(), err)
		}
	}
	for _, ns := range mapperFixtureNamespaces {
		ensureNamespace(t, ctx, src, ns)
		for i := 0; i < 40; i++ {
			create(configMapsGVR, decorateFixture(newConfigMap(ns, fmt.Sprintf("cm-%02d", i), randomLocations(r, locations)...), false))
		}
		for i := 0; i < 25; i++ {
			create(mapperSecretsGVR, decorateFixture(newMapperSecret(ns, fmt.Sprintf("secret-%02d", i), randomLocations(r, locations)...), false))
		}
		for i := 0; i < 20; i++ {
			create(mapperServicesGVR, decorateFixture(newMapperService(ns, fmt.Sprintf("svc-%02d", i), randomLocations(r, locations)...), false))
			create(deploymentsGVR, decorateFixture(newDeployment(ns, fmt.Sprintf("deploy-%02d", i), randomLocations(r, locations)...), i%4 == 0))
			create(widgetsGVR, decorateFixture(newWidget(widgetsGVR, "Widget", ns, fmt.Sprintf("widget-%02d", i), randomLocations(r, locations)...), i%4 == 0))
		}
	}
}

// mapperAssignedTo lists, from the source with the twin labels, the keys of gvr assigned to
// location.
func mapperAssignedTo(t *testing.T, ctx context.Context, src dynamic.Interface, gvr schema.GroupVersionResource, location string) sets.Set[string] {
	t.Helper()
	return groundTruth(t, ctx, src, gvr, location, "")
}

// mapperTargetUIDs returns namespace/name → uid of the managed objects of gvr on a target.
func mapperTargetUIDs(t *testing.T, ctx context.Context, tgt dynamic.Interface, gvr schema.GroupVersionResource, location string) map[string]string {
	t.Helper()
	list, err := tgt.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: contract.LocationLabel + "=" + location})
	if err != nil {
		t.Fatalf("listing managed %s on the target of %s: %v", gvr.Resource, location, err)
	}
	out := map[string]string{}
	for _, i := range list.Items {
		out[i.GetNamespace()+"/"+i.GetName()] = string(i.GetUID())
	}
	return out
}
