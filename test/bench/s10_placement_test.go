package bench

import (
	"math"
	"testing"
)

// TestPlacementFloor checks the floor of scenario 10 on numbers worked by hand: 100 s of
// placement and a 30 s quiet window on 2 cores.
func TestPlacementFloor(t *testing.T) {
	initial := map[string]float64{"kube-apiserver": 120, "etcd": 20, "mapper-controller": 40, "bench": 10}
	quiet := map[string]float64{"kube-apiserver": 12, "etcd": 3, "mapper-controller": 1.5, "bench": 4.5}
	f := placementFloor(initial, quiet, 100, 30, 2)
	// Quiet rates: 0.4 + 0.1 + 0.05 + 0.15 = 0.7 cores, so 1.3 are spare. Extra CPU:
	// kube-apiserver 120-40 = 80, etcd 20-10 = 10, controller 40-5 = 35, bench 10-15 < 0 → 0.
	want := map[string]float64{"kube-apiserver": 80, "etcd": 10, "mapper-controller": 35, "bench": 0}
	for role, w := range want {
		if math.Abs(f.extra[role]-w) > 1e-9 {
			t.Errorf("extra %s = %v, want %v", role, f.extra[role], w)
		}
	}
	if math.Abs(f.spareCores-1.3) > 1e-9 || math.Abs(f.sourceCPU-90) > 1e-9 || math.Abs(f.seconds-90/1.3) > 1e-9 {
		t.Errorf("floor = %+v, want 1.3 spare cores, 90 CPU-seconds, %.2f s", f, 90/1.3)
	}
	if got, want := f.perObject(1000), "bench 0.00 ms, etcd 10.00 ms, kube-apiserver 80.00 ms, mapper-controller 35.00 ms"; got != want {
		t.Errorf("perObject = %q, want %q", got, want)
	}
	if busy := placementFloor(initial, map[string]float64{"kube-apiserver": 60}, 100, 30, 2); !math.IsInf(busy.seconds, 1) {
		t.Errorf("with no spare core the floor is %v, want +Inf", busy.seconds)
	}
}
