package contract

import "testing"

func TestFinalizerLocation(t *testing.T) {
	for _, tc := range []struct {
		f    string
		want string
		ok   bool
	}{
		{LocationFinalizer("east"), "east", true},
		{"locations.mapper.kcp.io/", "", false},
		{"locations.mapper.kcp.io/East", "", false},
		{"kubernetes.io/pvc-protection", "", false},
		{"locations.mapper.kcp.io/a/b", "", false},
	} {
		got, ok := FinalizerLocation(tc.f)
		if got != tc.want || ok != tc.ok {
			t.Errorf("FinalizerLocation(%q) = %q, %v; want %q, %v", tc.f, got, ok, tc.want, tc.ok)
		}
	}
	if got := OutcomeAnnotation("west"); got != "outcome.kcp.io/west" {
		t.Errorf("OutcomeAnnotation(west) = %q", got)
	}
}
