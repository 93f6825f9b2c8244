package bench

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestQuickPreset runs the benchmark's quick preset on real servers as a smoke test: every
// scenario must run and produce numbers, and the report files must be written. It asserts no
// timings (they belong in bench/RESULTS.md, not in a pass/fail test on a shared CI machine).
func TestQuickPreset(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, kube-apiservers, mapper-apiserver and the mapper; skipped with -short")
	}
	cfg, err := Preset("quick")
	if err != nil {
		t.Fatal(err)
	}
	cfg.OutDir = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	r := Run(ctx, t, cfg, "go test ./test/bench -run TestQuickPreset")

	if len(r.Scenarios) != 7 {
		t.Fatalf("%d scenarios in the report, want 7", len(r.Scenarios))
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
	for _, f := range []string{"RESULTS.md", "results.json"} {
		if fi, err := os.Stat(filepath.Join(cfg.OutDir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s was not written: %v", f, err)
		}
	}
}
