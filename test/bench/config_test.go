package bench

import (
	"flag"
	"testing"
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
