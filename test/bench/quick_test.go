//go:build benchquick

package bench

import (
	"context"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestQuickPreset runs the benchmark's quick preset on real servers: every scenario must run
// and produce numbers, every correctness check of the run must pass (scenario 1: the view, the
// label-selector LIST and the naive list-all-and-filter list exactly the objects the data set
// assigns to each sampled location; scenario 2: every view watch, one per location and then
// one per location and resource of the 10, gets each event it is owed exactly once;
// scenario 6: the mapper maps every object of its location;
// scenario 8: mapper-controller keeps every heartbeating location Ready and marks a stopped one;
// scenario 9: every customized ConfigMap shows its location in each view, no other does;
// scenario 10: every application is placed whole on 2 locations, none on the one whose heartbeat
// stopped, and a quiet window writes nothing; scenario 11: every status write of the storm succeeds and
// each location's watch gets the event of each of its own writes),
// and the report files must be written. It asserts no timings (they belong in bench/RESULTS.md,
// not in a pass/fail test on a shared CI machine).
//
// It is a benchmark run (about 5 minutes on an idle 2-core machine), built only with the tag
// benchquick: `make bench-quick` runs it, not `make test`. The report goes to $BENCH_OUT (a
// temporary directory when unset); $BENCH_FLAGS are hack/bench's flags over the quick preset.
func TestQuickPreset(t *testing.T) {
	out := os.Getenv("BENCH_OUT")
	if out == "" {
		out = t.TempDir()
	}
	cfg, err := ParseFlags(flag.NewFlagSet("bench", flag.ContinueOnError), append([]string{"--preset=quick", "--out=" + out}, strings.Fields(os.Getenv("BENCH_FLAGS"))...))
	if err != nil {
		t.Fatal(err)
	}
	command := os.Getenv("BENCH_COMMAND")
	if command == "" {
		command = "go test -tags benchquick ./test/bench -run TestQuickPreset"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	r := Run(ctx, t, cfg, command)

	if len(r.Scenarios) != 11 {
		t.Fatalf("%d scenarios in the report, want 11", len(r.Scenarios))
	}
	for i, s := range r.Scenarios {
		if s.ID != i+1 {
			t.Errorf("scenario %d has id %d", i+1, s.ID)
		}
		if !s.Ran {
			t.Errorf("scenario %d (%s) did not run: %s", s.ID, s.Title, s.Reason)
			continue
		}
		if len(s.Comparisons) == 0 || len(s.Targets) == 0 {
			t.Errorf("scenario %d (%s) has no figures or no targets", s.ID, s.Title)
		}
		positive := false
		for _, c := range s.Comparisons {
			if math.IsNaN(c.Ours) || math.IsInf(c.Ours, 0) {
				t.Errorf("scenario %d: %s is %v", s.ID, c.Metric, c.Ours)
			}
			if c.Ours > 0 {
				positive = true
			}
		}
		if !positive {
			t.Errorf("scenario %d (%s): no figure is positive: %+v", s.ID, s.Title, s.Comparisons)
		}
	}
	// The scenarios whose figures depend on a correct result carry checks; a run that lost them
	// would pass without proving anything.
	for id, name := range map[int]string{1: "lists agree", 2: "view watches get their events", 6: "mapper finished", 8: "locations stay Ready; a stopped one becomes Unknown",
		9: "customized views show their location", 10: "every application placed whole, none on the stopped location, no write when nothing changes",
		11: "status writes succeed and reach the writer's own watch"} {
		if s := r.Scenarios[id-1]; s.Ran && len(s.Checks) == 0 {
			t.Errorf("scenario %d (%s) recorded no correctness check (%s)", id, s.Title, name)
		}
	}
	for _, s := range r.Scenarios {
		for _, c := range s.Checks {
			if !c.Passed() {
				t.Errorf("scenario %d (%s): check failed: %s: %d of %d comparisons failed: %s", s.ID, s.Title, c.Name, c.Failures, c.Compared, c.Detail)
			}
		}
	}
	// The diagnostics that explain two targets: the mapper's CPU profile of its initial sync, and
	// mapper-apiserver's own durations of the view LISTs of scenario 1.
	if cfg.Profiles && !hasProfile(r.Scenarios[5], "s6-sync-mapper") {
		t.Errorf("scenario 6 has no CPU profile of the mapper (s6-sync-mapper)")
	}
	if !hasNote(r.Scenarios[0], "mapper-apiserver itself (apiserver_request_duration_seconds") {
		t.Errorf("scenario 1 does not report mapper-apiserver's own durations of the view's LISTs alone: %q", r.Scenarios[0].Notes)
	}
	for _, f := range []string{"RESULTS.md", "results.json"} {
		if fi, err := os.Stat(filepath.Join(cfg.OutDir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s was not written: %v", f, err)
		}
	}
}

// hasProfile reports whether s carries the profile named name.
func hasProfile(s *Scenario, name string) bool {
	for _, p := range s.Profiles {
		if p.Name == name {
			return true
		}
	}
	return false
}

// hasNote reports whether one of s's notes contains text.
func hasNote(s *Scenario, text string) bool {
	for _, n := range s.Notes {
		if strings.Contains(n, text) {
			return true
		}
	}
	return false
}
