package statusrecords

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// TestNeedsWork: an object is looked at when it carries status records, or reflects status
// while assigned to several locations; not otherwise.
func TestNeedsWork(t *testing.T) {
	for _, c := range []struct {
		annotations map[string]string
		want        bool
	}{
		{map[string]string{contract.AssignedLocationsAnnotation: `["east","west"]`}, false},
		{map[string]string{contract.AssignedLocationsAnnotation: `["east"]`, contract.StatusPolicyAnnotation: contract.StatusPolicyReflect}, false},
		{map[string]string{contract.AssignedLocationsAnnotation: `["east","west"]`, contract.StatusPolicyAnnotation: contract.StatusPolicySummarize}, true},
		{map[string]string{contract.StatusRecordAnnotation("gone"): `{}`}, true},
		{map[string]string{contract.AssignedLocationsAnnotation: `["east"]`, contract.OutcomeAnnotation("gone"): `{"reason":"Paused"}`}, true},
		{map[string]string{contract.AssignedLocationsAnnotation: `not json`, contract.StatusPolicyAnnotation: contract.StatusPolicyReflect}, false},
	} {
		if got := NeedsWork(c.annotations); got != c.want {
			t.Errorf("NeedsWork(%v) = %v, want %v", c.annotations, got, c.want)
		}
	}
}

// TestQueueItem: a queue item names the resource and the object's key, and parses back.
func TestQueueItem(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	for _, key := range []contract.Key{contract.NewKey("root", "ns", "web"), contract.NewKey("root", "", "cluster-scoped")} {
		g, k, err := parseItem(itemOf(gvr, key))
		if err != nil || g != gvr || k != key {
			t.Errorf("parseItem(itemOf(%v, %s)) = %v, %s, %v", gvr, key, g, k, err)
		}
	}
	core := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	if g, _, err := parseItem(itemOf(core, "root|ns/a")); err != nil || g != core {
		t.Errorf("core group: %v, %v", g, err)
	}
}
