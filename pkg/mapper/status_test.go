package mapper

import (
	"reflect"
	"strconv"
	"testing"
)

// TestReportedStatus: the observedGeneration a target copy reports through its view counts the
// view's generations (contract.SourceGenerationAnnotation), and only once the target's
// controller observed the copy's latest generation; before that the view's own is kept.
func TestReportedStatus(t *testing.T) {
	live := func(generation, observed int64, stamp string) string {
		y := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  generation: " + strconv.FormatInt(generation, 10) + "\n"
		if stamp != "" {
			y += "  annotations:\n    kcp.io/source-generation: \"" + stamp + "\"\n"
		}
		y += "status:\n  replicas: 3\n"
		if observed > 0 {
			y += "  observedGeneration: " + strconv.FormatInt(observed, 10) + "\n"
		}
		return y
	}
	view := func(observed int64) string {
		y := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  generation: 7\n"
		if observed > 0 {
			y += "status:\n  observedGeneration: " + strconv.FormatInt(observed, 10) + "\n"
		}
		return y
	}
	for _, tc := range []struct {
		name       string
		live, view string
		want       map[string]interface{}
	}{
		{"observed the latest apply: the view generation it came from",
			live(4, 4, "7"), view(5), map[string]interface{}{"replicas": int64(3), "observedGeneration": int64(7)}},
		{"observed beyond (a target-side change since): still the view generation",
			live(5, 5, "7"), view(0), map[string]interface{}{"replicas": int64(3), "observedGeneration": int64(7)}},
		{"not observed yet: the view's own is kept",
			live(5, 4, "7"), view(5), map[string]interface{}{"replicas": int64(3), "observedGeneration": int64(5)}},
		{"not observed yet, the view shows none: none",
			live(5, 4, "7"), view(0), map[string]interface{}{"replicas": int64(3)}},
		{"a copy without the annotation: the view's own is kept",
			live(4, 4, ""), view(5), map[string]interface{}{"replicas": int64(3), "observedGeneration": int64(5)}},
		{"an annotation that is not a number: as without one",
			live(4, 4, "x"), view(0), map[string]interface{}{"replicas": int64(3)}},
		{"no observedGeneration: the status as it is",
			live(4, 0, "7"), view(5), map[string]interface{}{"replicas": int64(3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, v := mustObject(t, tc.live), mustObject(t, tc.view)
			before := l.DeepCopy()
			if got := ReportedStatus(l, v); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ReportedStatus = %v, want %v", got, tc.want)
			}
			if !reflect.DeepEqual(l.Object, before.Object) {
				t.Error("ReportedStatus changed the target copy")
			}
		})
	}
}
