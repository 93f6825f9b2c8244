package contract

import (
	"reflect"
	"testing"
)

func TestStatusRecord(t *testing.T) {
	ann := map[string]string{
		StatusRecordAnnotation("east"):  `{"replicas":2}`,
		StatusRecordAnnotation("west"):  `not json`,
		StatusRecordAnnotation("north"): `null`,
		StatusLocationAnnotation:        "east",
	}
	for _, c := range []struct {
		location string
		want     map[string]interface{}
		ok, err  bool
	}{
		{"east", map[string]interface{}{"replicas": int64(2)}, true, false},
		{"west", nil, true, true},
		{"north", nil, true, true},
		{"south", nil, false, false},
	} {
		got, ok, err := StatusRecord(ann, c.location)
		if !reflect.DeepEqual(got, c.want) || ok != c.ok || (err != nil) != c.err {
			t.Errorf("StatusRecord(%s) = %v, %v, %v; want %v, %v, error %v", c.location, got, ok, err, c.want, c.ok, c.err)
		}
	}
	if got, want := StatusRecordLocations(ann), []string{"east", "north", "west"}; !reflect.DeepEqual(got, want) {
		t.Errorf("StatusRecordLocations = %v, want %v", got, want)
	}
	if !HasStatusRecords(ann) || HasStatusRecords(map[string]string{StatusLocationAnnotation: "east"}) {
		t.Errorf("HasStatusRecords disagrees with StatusRecordLocations")
	}
}
