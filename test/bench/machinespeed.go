package bench

import (
	"crypto/sha256"
	"os"
	"strconv"
	"strings"
	"time"
)

// machineSpeed returns this machine's single-core speed in MB/s: SHA-256 over 64 MiB, the best of
// three runs. The figure means nothing alone; between runs of the benchmark it tells how fast the
// machine was (a shared virtual machine's speed varies from hour to hour).
func machineSpeed() float64 {
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	best := time.Duration(0)
	for i := 0; i < 3; i++ {
		t0 := time.Now()
		sha256.Sum256(buf)
		if d := time.Since(t0); best == 0 || d < best {
			best = d
		}
	}
	return float64(len(buf)) / 1e6 / best.Seconds()
}

// cpuSteal returns the machine's steal time and its total CPU time so far, in clock ticks, from
// the "cpu" line of /proc/stat; ok is false when it cannot be read.
func cpuSteal() (steal, total uint64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	// cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	for i := 1; i <= 8; i++ {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += v
		if i == 8 {
			steal = v
		}
	}
	return steal, total, true
}
