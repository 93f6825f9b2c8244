package contract

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cluster-mapper/cluster-mapper/test/race"
)

func TestParseLocations(t *testing.T) {
	tooMany := "[" + strings.Repeat(`"a",`, MaxLocationsPerObject) + `"a"]`
	justEnough := make([]string, MaxLocationsPerObject)
	for i := range justEnough {
		justEnough[i] = fmt.Sprintf(`"l%d"`, i)
	}
	tests := []struct {
		value   string
		want    []string
		wantErr string
	}{
		{value: `["east"]`, want: []string{"east"}},
		{value: `["west","east"]`, want: []string{"east", "west"}},
		{value: ` [ "b" , "a", "b", "a" ] `, want: []string{"a", "b"}},
		{value: `["a-1","0"]`, want: []string{"0", "a-1"}},
		{value: `["` + strings.Repeat("a", 63) + `"]`, want: []string{strings.Repeat("a", 63)}},
		{value: "[" + strings.Join(justEnough, ",") + "]", want: nil /* checked by length below */},
		{value: ``, wantErr: "not valid JSON"},
		{value: `east`, wantErr: "not valid JSON"},
		{value: `["east"`, wantErr: "not valid JSON"},
		{value: `["east"] x`, wantErr: "not valid JSON"},
		{value: `"east"`, wantErr: "not a JSON array"},
		{value: `null`, wantErr: "not a JSON array"},
		{value: `{"east":true}`, wantErr: "not a JSON array"},
		{value: `[]`, wantErr: "empty array"},
		{value: `[1]`, wantErr: "entry 0 is not a string"},
		{value: `["a", null]`, wantErr: "entry 1 is not a string"},
		{value: `["a", ["b"]]`, wantErr: "entry 1 is not a string"},
		{value: `["East"]`, wantErr: "not a valid location name"},
		{value: `["-east"]`, wantErr: "not a valid location name"},
		{value: `["a.b"]`, wantErr: "not a valid location name"},
		{value: `[""]`, wantErr: "not a valid location name"},
		{value: `["` + strings.Repeat("a", 64) + `"]`, wantErr: "not a valid location name"},
		{value: tooMany, wantErr: "too many locations"},
	}
	for _, tc := range tests {
		name := tc.value
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			got, err := ParseLocations(tc.value)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseLocations(%q) = %v, %v; want error containing %q", tc.value, got, err, tc.wantErr)
				}
				if got != nil {
					t.Fatalf("got %v with error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseLocations(%q): unexpected error %v", tc.value, err)
			}
			if tc.want == nil {
				if len(got) != MaxLocationsPerObject || !sort.StringsAreSorted(got) {
					t.Fatalf("want %d sorted locations, got %d", MaxLocationsPerObject, len(got))
				}
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseLocations(%q) = %v, want %v", tc.value, got, tc.want)
			}
		})
	}
}

func FuzzParseLocations(f *testing.F) {
	for _, seed := range []string{`["east"]`, `["b","a","b"]`, `[]`, `null`, `[1,"a"]`, `["A"]`, `{"a":1}`, `"x"`, `["a-b","c"]`, `[` + strings.Repeat(`"a",`, 10) + `"a"]`,
		`["west","east"]`, `["a","","b"]`, `["a\u0062"]`, `[ "a"]`, `["a"],["b"]`, `["a","b"]x`, `["` + strings.Repeat(`a","`, MaxLocationsPerObject) + `a"]`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		got, err := ParseLocations(value)
		// The compact form's fast path agrees with encoding/json wherever it answers.
		if fast, ok := parseCompactLocations(value); ok {
			slow, slowErr := parseLocationsJSON(value)
			if slowErr != nil || !slices.Equal(fast, slow) {
				t.Fatalf("%q: fast path %v, encoding/json %v (%v)", value, fast, slow, slowErr)
			}
		}
		if err != nil {
			if got != nil {
				t.Fatalf("result %v together with error %v", got, err)
			}
			return
		}
		if len(got) == 0 || len(got) > MaxLocationsPerObject {
			t.Fatalf("accepted %q with %d locations", value, len(got))
		}
		for i, l := range got {
			if errs := validation.IsDNS1123Label(l); len(errs) > 0 {
				t.Fatalf("accepted invalid location %q from %q: %v", l, value, errs)
			}
			if i > 0 && got[i-1] >= l {
				t.Fatalf("result not sorted and unique: %v", got)
			}
		}
	})
}

func TestKey(t *testing.T) {
	tests := []struct {
		cluster, ns, name string
		want              Key
	}{
		{"root", "default", "cm", "root|default/cm"},
		{"root:org", "", "node-1", "root:org|node-1"},
		{"", "ns", "x", "|ns/x"},
	}
	for _, tc := range tests {
		k := NewKey(tc.cluster, tc.ns, tc.name)
		if k != tc.want {
			t.Errorf("NewKey(%q,%q,%q) = %q, want %q", tc.cluster, tc.ns, tc.name, k, tc.want)
		}
		c, ns, n, ok := k.Split()
		if !ok || c != tc.cluster || ns != tc.ns || n != tc.name {
			t.Errorf("%q.Split() = %q,%q,%q,%v", k, c, ns, n, ok)
		}
	}
	if _, _, _, ok := Key("nobar").Split(); ok {
		t.Errorf("Split of a malformed key succeeded")
	}
}

// TestParseLocationsCompactAllocatesOnlyTheResult: the compact form every writer uses is parsed
// without encoding/json's garbage: one allocation, the result (the cache parses the annotation
// of every object it stores).
func TestParseLocationsCompactAllocatesOnlyTheResult(t *testing.T) {
	value := `["west","east","east"]`
	var got []string
	if n := testing.AllocsPerRun(100, func() { got, _ = ParseLocations(value) }); n > 1 && !race.Enabled {
		t.Errorf("ParseLocations(%s): %v allocations, want 1", value, n)
	}
	if want := []string{"east", "west"}; !slices.Equal(got, want) {
		t.Errorf("ParseLocations(%s) = %v, want %v", value, got, want)
	}
}
