package cache

import (
	"reflect"
	"testing"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
		{"several locations without reflection", nil, source, []string{"east", "west"}, "east", source, true},
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
