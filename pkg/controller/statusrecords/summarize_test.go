package statusrecords

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// record parses a status record as the cache does (JSON numbers as int64, via unstructured).
func record(t *testing.T, s string) map[string]interface{} {
	t.Helper()
	var m map[string]interface{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSummarize: the rules of docs/status.md "Summarize": counters summed, observedGeneration
// and other fields left out, a condition True only when every location reports it True, its
// reason and message from the first location that is not.
func TestSummarize(t *testing.T) {
	east := record(t, `{"observedGeneration":3,"replicas":4,"readyReplicas":4,"availableReplicas":4,"updatedReplicas":4,
		"collisionCount":1,"conditions":[
		{"type":"Available","status":"True","reason":"MinimumReplicasAvailable","message":"ok","lastTransitionTime":"2026-11-24T10:00:00Z"},
		{"type":"Progressing","status":"True","reason":"NewReplicaSetAvailable","message":"done","lastTransitionTime":"2026-11-24T10:00:01Z"}]}`)
	west := record(t, `{"observedGeneration":3,"replicas":3,"readyReplicas":1,"availableReplicas":1,"updatedReplicas":3,"unavailableReplicas":2,
		"conditions":[
		{"type":"Available","status":"False","reason":"MinimumReplicasUnavailable","message":"Deployment does not have minimum availability.","lastTransitionTime":"2026-11-24T10:00:05Z"},
		{"type":"Progressing","status":"True","reason":"ReplicaSetUpdated","message":"progressing","lastTransitionTime":"2026-11-24T10:00:02Z"}]}`)

	got := Summarize([]string{"west", "east"}, map[string]map[string]interface{}{"east": east, "west": west})
	want := record(t, `{"replicas":7,"readyReplicas":5,"availableReplicas":5,"updatedReplicas":7,"unavailableReplicas":2,
		"conditions":[
		{"type":"Available","status":"False","reason":"MinimumReplicasUnavailable","message":"west: Deployment does not have minimum availability.","lastTransitionTime":"2026-11-24T10:00:05Z"},
		{"type":"Progressing","status":"True","reason":"NewReplicaSetAvailable","message":"east: done","lastTransitionTime":"2026-11-24T10:00:02Z"}]}`)
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("summary of east and west:\n got %s\nwant %s", g, w)
	}

	// A third location that has not reported: the conditions are not True.
	got = Summarize([]string{"west", "east", "north"}, map[string]map[string]interface{}{"east": east, "west": west})
	progressing := got["conditions"].([]interface{})[1].(map[string]interface{})
	if progressing["status"] != "Unknown" || progressing["message"] != "north: the location reports no Progressing condition" {
		t.Errorf("Progressing with a silent location: %v", progressing)
	}

	if !reflect.DeepEqual(Summarize([]string{"east"}, nil), map[string]interface{}{}) {
		t.Errorf("summary of no records: %v, want empty", Summarize([]string{"east"}, nil))
	}
	for gk, want := range map[schema.GroupKind]bool{
		{Group: "apps", Kind: "Deployment"}: true, {Group: "apps", Kind: "StatefulSet"}: true,
		{Group: "apps", Kind: "ReplicaSet"}: true, {Group: "", Kind: "ConfigMap"}: false,
	} {
		if Summarizes(gk) != want {
			t.Errorf("Summarizes(%v) = %v", gk, !want)
		}
	}
}

func mustJSON(t *testing.T, v interface{}) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestObservedGeneration: the summary's observedGeneration is the source's generation once every
// location reports its view's current generation, else the least generation reported, and
// none while some location reports none.
func TestObservedGeneration(t *testing.T) {
	locs := []string{"east", "north", "west"}
	// The views: east and north show generation 4 (their last change outside .status); west
	// shows 6 (a change only it sees, its spec-diff patch). The source is at 9: status records
	// moved it since.
	views := map[string]int64{"east": 4, "north": 4, "west": 6}
	rec := func(observed ...int64) map[string]map[string]interface{} {
		out := map[string]map[string]interface{}{}
		for i, g := range observed {
			out[locs[i]] = map[string]interface{}{"replicas": int64(1)}
			if g > 0 {
				out[locs[i]]["observedGeneration"] = g
			}
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		records map[string]map[string]interface{}
		want    int64
		wantOK  bool
	}{
		{"every location observed its view: the source's generation", rec(4, 4, 6), 9, true},
		{"west has not observed its patch yet: the generation it observed", rec(4, 4, 5), 5, true},
		{"the least of those behind", rec(3, 4, 5), 3, true},
		{"a location reports none", rec(4, 0, 6), 0, false},
		{"a location has no record", rec(4, 4), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := ObservedGeneration(locs, tc.records, func(l string) (int64, error) { return views[l], nil }, 9)
			if err != nil || got != tc.want || ok != tc.wantOK {
				t.Errorf("ObservedGeneration = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
