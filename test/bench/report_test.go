package bench

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// TestCommittedResultsRenderAgain: bench/results.json renders exactly bench/RESULTS.md, so a
// partial run (--scenarios=8) that merges into results.json rewrites the other scenarios'
// sections unchanged.
func TestCommittedResultsRenderAgain(t *testing.T) {
	b, err := os.ReadFile("../../bench/results.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../bench/RESULTS.md")
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if got := r.Markdown(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) && i < len(wl); i++ {
			if gl[i] != wl[i] {
				t.Fatalf("line %d differs:\n got: %s\nwant: %s", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%d lines rendered, %d committed", len(gl), len(wl))
	}
}

// TestMergeReports: a partial run's scenario replaces the one of the same id or joins in id
// order, marked with the partial run; the others and the header stay.
func TestMergeReports(t *testing.T) {
	old := &Report{Command: "make bench", Scenarios: []*Scenario{{ID: 1, Title: "one"}, {ID: 7, Title: "seven"}}}
	partial := &Report{Command: "bench --scenarios=8", Started: time.Unix(100, 0), Scenarios: []*Scenario{{ID: 8, Title: "eight", Ran: true}}}
	m := mergeReports(old, partial)
	if m.Command != "make bench" || len(m.Scenarios) != 3 || m.Scenarios[2].ID != 8 || m.Scenarios[0].Separate != nil {
		t.Fatalf("merged: %+v", m)
	}
	if s := m.Scenarios[2].Separate; s == nil || s.Command != "bench --scenarios=8" {
		t.Fatalf("scenario 8 not marked with its run: %+v", s)
	}
	again := mergeReports(m, &Report{Command: "bench --scenarios=8 --locations=10", Scenarios: []*Scenario{{ID: 8, Title: "eight'"}}})
	if len(again.Scenarios) != 3 || again.Scenarios[2].Title != "eight'" {
		t.Fatalf("a second partial run must replace scenario 8: %+v", again.Scenarios)
	}
}

// TestComparisonJSONKeepsNoFigure: an absent alternative figure (NaN) survives results.json.
func TestComparisonJSONKeepsNoFigure(t *testing.T) {
	b, err := json.Marshal(Comparison{Metric: "m", Ours: 1, Alternative: "x", AltValue: math.NaN()})
	if err != nil {
		t.Fatal(err)
	}
	var c Comparison
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(c.AltValue) || c.Alternative != "x" || c.Ours != 1 {
		t.Fatalf("round trip: %+v", c)
	}
}

// TestParseScenarios covers --scenarios.
func TestParseScenarios(t *testing.T) {
	ids, err := parseScenarios("8, 8")
	if err != nil || len(ids) != 1 || ids[0] != 8 {
		t.Fatalf("parseScenarios(8, 8) = %v, %v", ids, err)
	}
	if _, err := parseScenarios("x"); err == nil {
		t.Fatal("parseScenarios(x): no error")
	}
	c, _ := Preset("quick")
	c.Scenarios = []int{1, 8}
	if err := c.Validate(); err == nil {
		t.Fatal("scenarios 1 and 8 without 2-7 must be refused")
	}
	c.Scenarios = []int{8}
	if err := c.Validate(); err != nil || !c.partial() || c.runs(1) || !c.runs(8) {
		t.Fatalf("--scenarios=8: %v partial=%v", err, c.partial())
	}
}
