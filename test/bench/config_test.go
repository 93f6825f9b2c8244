package bench

import (
	"flag"
	"testing"
	"time"
)

// TestScenarioSubsets: a run of scenario 11 alone (or of 8 or 10) is valid and partial, so it
// merges into the report in --out; giving every scenario that can be given (all but 9, which
// runs with 1-7) is a full run; 9 alone and an incomplete 1-7 are refused.
func TestScenarioSubsets(t *testing.T) {
	for _, c := range []struct {
		scenarios string
		valid     bool
		partial   bool
	}{
		{"11", true, true},
		{"8,10,11", true, true},
		{"1,2,3,4,5,6,7", true, true},
		{"1,2,3,4,5,6,7,8,10,11", true, false},
		{"9", false, false},
		{"12", false, false},
		{"1,11", false, false},
		{"4,5", true, true},
		{"4", false, false},
		{"4,5,8", true, true},
	} {
		cfg, err := ParseFlags(flag.NewFlagSet("bench", flag.ContinueOnError), []string{"--preset=quick", "--scenarios=" + c.scenarios})
		if (err == nil) != c.valid {
			t.Errorf("--scenarios=%s: error %v, want valid %t", c.scenarios, err, c.valid)
			continue
		}
		if err == nil && cfg.partial() != c.partial {
			t.Errorf("--scenarios=%s: partial %t, want %t", c.scenarios, cfg.partial(), c.partial)
		}
	}
	cfg, err := ParseFlags(flag.NewFlagSet("bench", flag.ContinueOnError), []string{"--preset=quick", "--scenarios=11", "--storm-locations=5", "--storm-objects=7"})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.runs(11) || cfg.runs(1) || cfg.StormLocations != 5 || cfg.StormObjects != 7 {
		t.Errorf("--scenarios=11 --storm-locations=5 --storm-objects=7: %+v", cfg)
	}
}

// TestLargePreset: the large preset runs scenarios 5 and 4 alone on its 250k objects, as a full
// run of its own (not merged into another report), and says so; --scenarios picks others and
// drops the explanation.
func TestLargePreset(t *testing.T) {
	cfg, err := ParseFlags(flag.NewFlagSet("bench", flag.ContinueOnError), []string{"--preset=large"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Objects != 250_000 || cfg.Namespaces != 5_000 || cfg.Locations != 1_000 {
		t.Errorf("large: N=%d V=%d L=%d, want 250000, 5000, 1000", cfg.Objects, cfg.Namespaces, cfg.Locations)
	}
	for id := 1; id <= lastScenario; id++ {
		if want := id == 4 || id == 5; cfg.runs(id) != want {
			t.Errorf("large runs scenario %d: %t, want %t", id, cfg.runs(id), want)
		}
	}
	if cfg.partial() || cfg.Scope == "" {
		t.Errorf("large: partial %t, scope %q; want a full run that explains its scope", cfg.partial(), cfg.Scope)
	}
	cfg, err = ParseFlags(flag.NewFlagSet("bench", flag.ContinueOnError), []string{"--preset=large", "--scenarios=1,2,3,4,5,6,7"})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.runs(1) || cfg.runs(8) || cfg.partial() || cfg.Scope != "" {
		t.Errorf("large --scenarios=1-7: runs(1) %t runs(8) %t partial %t scope %q", cfg.runs(1), cfg.runs(8), cfg.partial(), cfg.Scope)
	}
	if l, _ := startupLimit(cfg.Objects); l != 60*time.Second {
		t.Errorf("start-up limit at %d objects: %s, want 60s", cfg.Objects, l)
	}
	if l, _ := startupLimit(50_000); l != 10*time.Second {
		t.Errorf("start-up limit at 50000 objects: %s, want 10s", l)
	}
}
