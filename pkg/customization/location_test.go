package customization

import (
	"strings"
	"testing"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// TestLocationShowsNameAndLabelsOnly: the `location` variable is the SyncTarget's name and
// labels; an expression reading its annotations does not compile (least disclosure:
// docs/tenancy.md), and a SyncTarget's annotations never reach a snapshot.
func TestLocationShowsNameAndLabelsOnly(t *testing.T) {
	_, errs := NewSnapshot(1, []*controlv1alpha1.Customization{customization("peek",
		jsonPatch(`[JSONPatch{op: "add", path: "/metadata/annotations/peek", value: location.metadata.annotations["owner"]}]`))}, locations)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "annotations") {
		t.Fatalf("compile errors %v, want one naming location.metadata.annotations", errs)
	}
	st := &controlv1alpha1.SyncTarget{}
	st.Name, st.Labels, st.Annotations = "west", map[string]string{"region": "us"}, map[string]string{"owner": "team-us"}
	if l := LocationFromSyncTarget(st); !l.Equal(Location{Name: "west", Labels: map[string]string{"region": "us"}}) {
		t.Errorf("LocationFromSyncTarget = %+v, want the name and labels only", l)
	}
	if v := newLocation(LocationFromSyncTarget(st)).binding.value["metadata"].(map[string]any); len(v) != 2 || v["annotations"] != nil {
		t.Errorf("the CEL value of a location = %v, want name and labels only", v)
	}
}
