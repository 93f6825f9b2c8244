package statusrecords

import (
	"context"
	"reflect"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// TestRecordsOfUnboundLocations: in the Bound mode (Config.Bound) an object is assigned to
// the locations bound to its namespace only, as the views see it. An object assigned to east
// and west, of a namespace bound to east only, is east's alone: east's record is folded into
// .status and west's (written before its binding went) is removed. (Without Bound the object
// has two locations and neither record is touched: the test fails so.)
func TestRecordsOfUnboundLocations(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetNamespace("tenant-a")
	u.SetName("o")
	u.SetAnnotations(map[string]string{
		contract.AssignedLocationsAnnotation:    `["east","west"]`,
		contract.StatusRecordAnnotation("east"): `{"phase":"east"}`,
		contract.StatusRecordAnnotation("west"): `{"phase":"west"}`,
	})
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ConfigMapList"}, u)
	c := New(Config{
		HasStatus: func(schema.GroupVersionResource) (bool, error) { return false, nil },
		Bound: func(cluster, namespace string, locations []string) []string {
			if cluster != "root" || namespace != "tenant-a" {
				t.Errorf("Bound asked for %s/%s, want root/tenant-a", cluster, namespace)
			}
			return slices.DeleteFunc(slices.Clone(locations), func(l string) bool { return l != "east" })
		},
	})
	ctx := context.Background()
	objects := client.Resource(gvr).Namespace("tenant-a")
	current, err := objects.Get(ctx, "o", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.reconcile(ctx, gvr, "root", objects, current); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	after, err := objects.Get(ctx, "o", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]interface{}{"phase": "east"}; !reflect.DeepEqual(after.Object["status"], want) {
		t.Errorf(".status = %v, want east's record %v", after.Object["status"], want)
	}
	if got := contract.StatusRecordLocations(after.GetAnnotations()); len(got) != 0 {
		t.Errorf("records left: %v, want none (east's folded, west's removed)", got)
	}
}

// TestOutcomeRecordsOfLocationsLeft: the outcome record of a location the object is no longer
// assigned to is removed, unless that location still holds its finalizer on the object (its
// mapper removes the record when it releases the object); the records of assigned locations
// stay.
func TestOutcomeRecordsOfLocationsLeft(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	record := `{"reason":"Conflict","time":"2026-11-28T16:00:00Z"}`
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetNamespace("apps")
	u.SetName("o")
	u.SetFinalizers([]string{contract.LocationFinalizer("north")})
	u.SetAnnotations(map[string]string{
		contract.AssignedLocationsAnnotation: `["east"]`,
		contract.OutcomeAnnotation("east"):   record,
		contract.OutcomeAnnotation("west"):   record,
		contract.OutcomeAnnotation("north"):  record,
	})
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ConfigMapList"}, u)
	c := New(Config{HasStatus: func(schema.GroupVersionResource) (bool, error) { return false, nil }})
	ctx := context.Background()
	objects := client.Resource(gvr).Namespace("apps")
	if err := c.reconcile(ctx, gvr, "root", objects, u); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	after, err := objects.Get(ctx, "o", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := contract.OutcomeRecordLocations(after.GetAnnotations())
	slices.Sort(got)
	if want := []string{"east", "north"}; !slices.Equal(got, want) {
		t.Errorf("outcome records left of %v, want %v (west's removed)", got, want)
	}
}
