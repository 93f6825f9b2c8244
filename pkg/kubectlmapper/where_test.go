package kubectlmapper

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	ctrldependencies "github.com/cluster-mapper/cluster-mapper/pkg/controller/dependencies"
	ctrlplacement "github.com/cluster-mapper/cluster-mapper/pkg/controller/placement"
)

func TestObjectLocations(t *testing.T) {
	conflict := contract.NewOutcomeRecord(contract.OutcomeConflict, "in the way", 2, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	now := metav1.Now()
	for _, c := range []struct {
		name       string
		obj        metav1.ObjectMeta
		want       []ObjectLocation
		wantByName map[string]string
	}{
		{
			name: "assigned nowhere",
			obj:  metav1.ObjectMeta{},
			want: []ObjectLocation{},
		},
		{
			name: "by hand, with records",
			obj: metav1.ObjectMeta{
				Annotations: map[string]string{
					contract.AssignedLocationsAnnotation:    `["east","west"]`,
					contract.OutcomeAnnotation("west"):      conflict.Encode(),
					contract.StatusRecordAnnotation("east"): `{"replicas":3,"readyReplicas":2}`,
				},
				Finalizers: []string{contract.LocationFinalizer("east"), "other.example.com/keep"},
			},
			want: []ObjectLocation{
				{Location: "east", Assigned: true, AssignedBy: AssignedByHand, Status: "2/3 ready", Finalizer: true},
				{Location: "west", Assigned: true, AssignedBy: AssignedByHand, Outcome: &conflict},
			},
		},
		{
			name: "by a Placement and a dependency",
			obj: metav1.ObjectMeta{Annotations: map[string]string{
				contract.AssignedLocationsAnnotation: `["east","north"]`,
				ctrlplacement.OwnerAnnotation:        "web",
				ctrldependencies.LocationsAnnotation: `["north"]`,
			}},
			want: []ObjectLocation{
				{Location: "east", Assigned: true, AssignedBy: AssignedByPlacementPrefix + "web"},
				{Location: "north", Assigned: true, AssignedBy: AssignedByDependency},
			},
		},
		{
			name: "unassigned while a location holds its copy; a record that does not parse",
			obj: metav1.ObjectMeta{
				Annotations: map[string]string{contract.AssignedLocationsAnnotation: `[]`, contract.OutcomeAnnotation("east"): `{"message":"no reason"}`},
				Finalizers:  []string{contract.LocationFinalizer("east")},
			},
			want: []ObjectLocation{{Location: "east", Finalizer: true, DeletionPending: true, OutcomeError: "the outcome record has no reason"}},
		},
		{
			name: "being deleted at the source",
			obj: metav1.ObjectMeta{
				DeletionTimestamp: &now,
				Annotations:       map[string]string{contract.AssignedLocationsAnnotation: `["east","west"]`},
				Finalizers:        []string{contract.LocationFinalizer("east")},
			},
			want: []ObjectLocation{
				{Location: "east", Assigned: true, AssignedBy: AssignedByHand, Finalizer: true, DeletionPending: true},
				{Location: "west", Assigned: true, AssignedBy: AssignedByHand},
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ObjectLocations(&c.obj)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("ObjectLocations:\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestStatusSummary(t *testing.T) {
	for _, c := range []struct {
		status map[string]interface{}
		want   string
	}{
		{map[string]interface{}{"replicas": int64(3)}, "0/3 ready"},
		{map[string]interface{}{"replicas": int64(3), "readyReplicas": int64(3)}, "3/3 ready"},
		{map[string]interface{}{"conditions": []interface{}{
			map[string]interface{}{"type": "Ready", "status": "True"},
			map[string]interface{}{"type": "Available", "status": "False"},
		}}, "Available=False,Ready=True"},
		{map[string]interface{}{"phase": "Bound"}, "recorded"},
	} {
		if got := StatusSummary(c.status); got != c.want {
			t.Errorf("StatusSummary(%v) = %q, want %q", c.status, got, c.want)
		}
	}
}

func TestWhereRow(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 14, 5, 0, time.UTC)
	rec := contract.NewOutcomeRecord(contract.OutcomeRejected, "spec.size: must be at most 100", 1, now.Add(-10*time.Minute))
	got := whereRow(ObjectLocation{Location: "west", Assigned: true, AssignedBy: "Placement/web", Outcome: &rec, Finalizer: true}, now)
	want := []interface{}{"west", "Placement/web", "Rejected", none, none, "true", "10m", "spec.size: must be at most 100"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("whereRow = %v, want %v", got, want)
	}
	if len(got) != len(whereColumns) {
		t.Errorf("whereRow has %d cells for %d columns", len(got), len(whereColumns))
	}
}

func TestResourceAndName(t *testing.T) {
	for _, c := range []struct {
		args                   []string
		wantResource, wantName string
		wantErr                bool
	}{
		{[]string{"deployments.apps/web"}, "deployments.apps", "web", false},
		{[]string{"cm", "settings"}, "cm", "settings", false},
		{[]string{"web"}, "", "", true},
		{[]string{"deployments/"}, "", "", true},
	} {
		r, n, err := resourceAndName(c.args)
		if r != c.wantResource || n != c.wantName || (err != nil) != c.wantErr {
			t.Errorf("resourceAndName(%q) = %q, %q, %v", c.args, r, n, err)
		}
	}
}
