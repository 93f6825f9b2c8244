package dependencies

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/pending"
	ctrlplacement "github.com/cluster-mapper/cluster-mapper/pkg/controller/placement"
	"github.com/cluster-mapper/cluster-mapper/pkg/placement"
)

// configMap returns a ConfigMap's metadata with annotations; recordOwned adds the
// managedFields entry kube-apiserver writes for this controller's apply of the record.
func configMap(annotations map[string]string, recordOwned bool) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "apps", ResourceVersion: "7", Annotations: annotations}}
	if recordOwned {
		m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:kcp.io/assigned-locations":{},"f:` + LocationsAnnotation + `":{}}}}`)}}}
	}
	return m
}

// TestDecide: what a dependency's patch keeps, adds and removes.
func TestDecide(t *testing.T) {
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	policy, err := placement.Compile(&controlv1alpha1.PlacementSpec{
		Resources:        []controlv1alpha1.ResourceRule{{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}},
		ObjectSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"placed": "yes"}},
		LocationSelector: &metav1.LabelSelector{},
	})
	if err != nil {
		t.Fatal(err)
	}
	ann := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	const assigned = contract.AssignedLocationsAnnotation
	for _, tc := range []struct {
		name   string
		obj    *metav1.PartialObjectMetadata
		need   []string
		frozen bool
		want   string // "assigned added", or "-" for no write
	}{
		{"unassigned, needed on east", configMap(nil, false), []string{"east"}, false, `[east] [east]`},
		{"already as needed", configMap(ann(assigned, `["east"]`, LocationsAnnotation, `["east"]`), true), []string{"east"}, false, "-"},
		{"hand-assigned west keeps west", configMap(ann(assigned, `["west"]`), false), []string{"east"}, false, `[east west] [east]`},
		{"hand-assigned where needed: nothing to add", configMap(ann(assigned, `["east"]`), false), []string{"east"}, false, "-"},
		{"an added location nobody needs leaves", configMap(ann(assigned, `["east","west"]`, LocationsAnnotation, `["east"]`), true), nil, false, `[west] []`},
		{"the last added location leaves with the record", configMap(ann(assigned, `["east"]`, LocationsAnnotation, `["east"]`), true), nil, false, `[] []`},
		{"frozen: nothing leaves", configMap(ann(assigned, `["east","west"]`, LocationsAnnotation, `["east"]`), true), []string{"north"}, true, `[east north west] [east north]`},
		{"a record someone else wrote is not trusted", configMap(ann(assigned, `["east"]`, LocationsAnnotation, `["east"]`), false), nil, false, "-"},
		{"a record someone else wrote: additions still come", configMap(ann(assigned, `["east"]`, LocationsAnnotation, `["east"]`), false), []string{"north"}, false, `[east north] [north]`},
		{"an assignment that does not parse is left alone", configMap(ann(assigned, `east`), false), []string{"north"}, false, "-"},
		{"placed by a Placement", configMap(ann(assigned, `["west"]`, ctrlplacement.OwnerAnnotation, "web"), false), []string{"east"}, false, "-"},
	} {
		c := &Controller{reported: map[string]sets.Set[string]{}, pending: pending.New()}
		r := &round{namespace: "apps", frozen: tc.frozen, placements: map[string]*placementInfo{"web": {live: true, policy: policy}}}
		w := c.decide(context.Background(), r, &dep{gvr: configMaps, obj: tc.obj, need: sets.New(tc.need...)})
		got := "-"
		if w != nil {
			got = fmt.Sprint(w.assigned, " ", w.added)
		}
		if strings.ReplaceAll(got, "  ", " ") != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	// Selected by a live Placement that has not placed it yet: the Placement will.
	selected := configMap(nil, false)
	selected.Labels = map[string]string{"placed": "yes"}
	c := &Controller{reported: map[string]sets.Set[string]{}, pending: pending.New()}
	r := &round{namespace: "apps", placements: map[string]*placementInfo{"web": {live: true, policy: policy}}}
	if w := c.decide(context.Background(), r, &dep{gvr: configMaps, obj: selected, need: sets.New("east")}); w != nil {
		t.Errorf("an object a Placement selects was assigned: %+v", w)
	}
}

// TestWriteAnnotations: an apply carries what is not empty; what is left out goes.
func TestWriteAnnotations(t *testing.T) {
	w := &write{obj: configMap(nil, false), assigned: []string{"east", "west"}, added: []string{"east"}}
	if got := fmt.Sprint(w.annotations()); got != `map[control.mapper.kcp.io/dependency-locations:["east"] kcp.io/assigned-locations:["east","west"]]` {
		t.Errorf("annotations %s", got)
	}
	w.added = nil
	if got := fmt.Sprint(w.annotations()); got != `map[kcp.io/assigned-locations:["east","west"]]` {
		t.Errorf("annotations %s", got)
	}
	w.assigned = nil
	if got := len(w.annotations()); got != 0 {
		t.Errorf("%d annotations, want none", got)
	}
}
