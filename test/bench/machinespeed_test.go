package bench

import "testing"

// TestMachineFigures checks that the machine's speed and CPU counters read as numbers a report can
// show.
func TestMachineFigures(t *testing.T) {
	if s := machineSpeed(); s <= 0 {
		t.Errorf("machineSpeed() = %v MB/s, want a positive speed", s)
	}
	steal, total, ok := cpuSteal()
	if !ok || total == 0 || steal > total {
		t.Errorf("cpuSteal() = %d, %d, %v: want the steal time within a positive total", steal, total, ok)
	}
}
