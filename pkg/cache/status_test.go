package cache

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

func statusObject(annotations map[string]string, status map[string]interface{}) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Thing",
		"metadata": map[string]interface{}{"name": "t", "namespace": "ns"},
	}}
	if status != nil {
		u.Object["status"] = status
	}
	u.SetAnnotations(annotations)
	return u
}

func TestLocationView(t *testing.T) {
	east := map[string]interface{}{"phase": "east"}
	west := map[string]interface{}{"phase": "west"}
	source := map[string]interface{}{"phase": "source"}
	records := map[string]string{
		contract.StatusPolicyAnnotation:                contract.StatusPolicyReflect,
		contract.StatusRecordAnnotationPrefix + "east": `{"phase":"east"}`,
		contract.StatusRecordAnnotationPrefix + "west": `{"phase":"west"}`,
	}
	cases := []struct {
		name        string
		annotations map[string]string
		status      map[string]interface{}
		locations   []string
		location    string
		want        interface{} // nil: no .status
		identity    bool        // ForLocation returns the object itself
	}{
		{"single location, no records", map[string]string{contract.StatusPolicyAnnotation: contract.StatusPolicyReflect}, source, []string{"east"}, "east", source, true},
		{"several locations without reflection", nil, source, []string{"east", "west"}, "east", source, false},
		{"several locations, own record", records, source, []string{"east", "west"}, "east", east, false},
		{"several locations, other own record", records, source, []string{"east", "west"}, "west", west, false},
		{"several locations, no record of its own", map[string]string{contract.StatusPolicyAnnotation: contract.StatusPolicyReflect, contract.StatusRecordAnnotationPrefix + "west": `{"phase":"west"}`}, source, []string{"east", "west"}, "east", nil, false},
		{"single location with a record not folded yet", records, source, []string{"east"}, "east", east, false},
		{"malformed record", map[string]string{contract.StatusRecordAnnotationPrefix + "east": `not json`}, source, []string{"east", "west"}, "east", nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := statusObject(c.annotations, c.status)
			o := newObject(contract.NewKey("c", "ns", "t"), "c", "ns", "t", c.locations, 1, u)
			v := o.ForLocation(c.location)
			if (v == o) != c.identity {
				t.Fatalf("ForLocation returned the object itself: %v, want %v", v == o, c.identity)
			}
			got, found := v.Unstructured().Object["status"]
			if c.want == nil && found {
				t.Errorf(".status = %v, want none", got)
			}
			if c.want != nil && !reflect.DeepEqual(got, c.want) {
				t.Errorf(".status = %v, want %v", got, c.want)
			}
			for k := range v.Unstructured().GetAnnotations() {
				if len(k) > len(contract.StatusRecordAnnotationPrefix) && k[:len(contract.StatusRecordAnnotationPrefix)] == contract.StatusRecordAnnotationPrefix {
					t.Errorf("the view keeps the record %s", k)
				}
			}
			if again := o.ForLocation(c.location); again != v {
				t.Error("a second ForLocation built another copy: the variant must be built once")
			}
			if _, has := u.GetAnnotations()[contract.StatusRecordAnnotationPrefix+"east"]; c.annotations[contract.StatusRecordAnnotationPrefix+"east"] != "" && !has {
				t.Error("ForLocation changed the shared source object")
			}
		})
	}
}

// TestLocationViewHidesOtherLocations: docs/design.md, "The location view": a view never shows
// another location. The view of east keeps nothing that names west or holds west's record, and its
// own spec-diff.kcp.io/east patch is applied, not shown ("already applied").
func TestLocationViewHidesOtherLocations(t *testing.T) {
	u := statusObject(map[string]string{
		contract.AssignedLocationsAnnotation:    `["east","west"]`,
		contract.StatusPolicyAnnotation:         contract.StatusPolicyReflect,
		contract.StatusLocationAnnotation:       "west",
		contract.StatusRecordAnnotation("west"): `{"phase":"west-secret"}`,
		contract.StatusRecordAnnotation("east"): `{"phase":"east"}`,
		contract.SpecDiffAnnotation("west"):     `[{"op":"add","path":"/data/x","value":"west-secret"}]`,
		contract.SpecDiffAnnotation("east"):     `[]`,
		contract.OutcomeAnnotation("west"):      `{"reason":"Conflict","message":"west-secret","time":"2026-11-28T16:00:00Z"}`,
		contract.OutcomeAnnotation("east"):      `{"reason":"Paused","time":"2026-11-28T16:00:00Z"}`,
		contract.LastAppliedConfigAnnotation:    `{"metadata":{"annotations":{"status.kcp.io/west":"west-secret"}}}`,
		"example.com/kept":                      "yes",
	}, map[string]interface{}{"phase": "west-secret"})
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "mapper-apiserver", Operation: metav1.ManagedFieldsOperationUpdate}})
	v := LocationView(u, []string{"east", "west"}, "east")
	raw, err := v.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"west", "managedFields", "last-applied"} {
		if strings.Contains(string(raw), leak) {
			t.Errorf("the view of east contains %q: %s", leak, raw)
		}
	}
	ann := v.GetAnnotations()
	want := map[string]string{
		contract.AssignedLocationsAnnotation: `["east"]`,
		contract.StatusPolicyAnnotation:      contract.StatusPolicyReflect,
		contract.OutcomeAnnotation("east"):   `{"reason":"Paused","time":"2026-11-28T16:00:00Z"}`,
		"example.com/kept":                   "yes",
	}
	if !reflect.DeepEqual(ann, want) {
		t.Errorf("annotations = %v, want %v", ann, want)
	}
	if got := v.Object["status"]; !reflect.DeepEqual(got, map[string]interface{}{"phase": "east"}) {
		t.Errorf(".status = %v, want east's record", got)
	}
	// The location that status-location names keeps it.
	if got := LocationView(u, []string{"east", "west"}, "west").GetAnnotations()[contract.StatusLocationAnnotation]; got != "west" {
		t.Errorf("west's view: %s = %q, want west", contract.StatusLocationAnnotation, got)
	}
	if _, ok := u.GetAnnotations()[contract.StatusRecordAnnotation("west")]; !ok || len(u.GetManagedFields()) == 0 {
		t.Error("LocationView changed its input")
	}
}

// TestNeedsVariants: an object assigned to one location is shared by its view (no copy) unless
// it carries something that view hides; ingest drops managedFields, so they alone never cost a
// copy.
func TestNeedsVariants(t *testing.T) {
	cases := []struct {
		name        string
		annotations map[string]string
		locations   []string
		managed     bool
		want        bool
	}{
		{"one location, canonical annotation", map[string]string{contract.AssignedLocationsAnnotation: `["east"]`}, []string{"east"}, false, false},
		{"one location, own status-location", map[string]string{contract.AssignedLocationsAnnotation: `["east"]`, contract.StatusLocationAnnotation: "east"}, []string{"east"}, false, false},
		{"one location, own spec-diff (applied, not shown)", map[string]string{contract.AssignedLocationsAnnotation: `["east"]`, contract.SpecDiffAnnotation("east"): `[]`}, []string{"east"}, false, true},
		{"one location, managedFields", map[string]string{contract.AssignedLocationsAnnotation: `["east"]`}, []string{"east"}, true, true},
		{"one location, annotation not canonical", map[string]string{contract.AssignedLocationsAnnotation: `[ "east", "east" ]`}, []string{"east"}, false, true},
		{"one location, other status-location", map[string]string{contract.AssignedLocationsAnnotation: `["east"]`, contract.StatusLocationAnnotation: "west"}, []string{"east"}, false, true},
		{"one location, other spec-diff", map[string]string{contract.AssignedLocationsAnnotation: `["east"]`, contract.SpecDiffAnnotation("west"): `[]`}, []string{"east"}, false, true},
		{"one location, last-applied", map[string]string{contract.AssignedLocationsAnnotation: `["east"]`, contract.LastAppliedConfigAnnotation: `{}`}, []string{"east"}, false, true},
		{"several locations", map[string]string{contract.AssignedLocationsAnnotation: `["east","west"]`}, []string{"east", "west"}, false, true},
		{"no location", map[string]string{contract.LastAppliedConfigAnnotation: `{}`}, nil, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := statusObject(c.annotations, nil)
			if c.managed {
				u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl"}})
			}
			if got := needsVariants(u, c.locations, marksOfObject(u)); got != c.want {
				t.Errorf("needsVariants = %v, want %v", got, c.want)
			}
			if !c.want && len(c.locations) == 1 {
				// No copy must mean: the view would not change the object.
				if v := LocationView(u, c.locations, c.locations[0]); !reflect.DeepEqual(v.Object, u.Object) {
					t.Errorf("shared without a copy, but the view differs:\n%v\n%v", v.Object, u.Object)
				}
			}
		})
	}
}

// TestIngestDropsManagedFields: the store keeps no managedFields, so the view of an object
// assigned to one location is the stored object itself.
func TestIngestDropsManagedFields(t *testing.T) {
	u := statusObject(map[string]string{contract.AssignedLocationsAnnotation: `["east"]`}, nil)
	u.SetResourceVersion("5")
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}})
	got, err := toVersion(u)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetManagedFields()) != 0 {
		t.Fatalf("managedFields kept: %v", got.GetManagedFields())
	}
}
