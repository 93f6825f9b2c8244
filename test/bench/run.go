// Package bench is cluster-mapper's benchmark at the design scale: it starts etcd, a source
// kube-apiserver and mapper-apiserver from the testenv as real processes, loads a data set of
// ConfigMaps and Deployments assigned to locations, runs the seven scenarios of bench/RESULTS.md side by
// side with kube-apiserver, scenario 8 (location heartbeats against the real
// mapper-controller), scenario 9 (customized views), scenario 10
// (placement of applications at scale) and scenario 11 (a status write storm through the views),
// and writes RESULTS.md and results.json.
//
// hack/bench is the command (`make bench`, `make bench-quick`); quick_test.go runs the quick
// preset as a smoke test. Measurements are taken from outside: latency at the client, CPU time
// and RSS from /proc, heap from the server's /metrics, profiles from its /debug/pprof.
package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// Run executes a benchmark run with cfg and writes its report into cfg.OutDir. command is the
// command line recorded in the report. It fails tb on errors that make the run meaningless
// (a server that does not start, a request that fails).
func Run(ctx context.Context, tb framework.TB, cfg Config, command string) *Report {
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	out, err := filepath.Abs(cfg.OutDir)
	if err != nil {
		tb.Fatal(err)
	}
	e := &env{tb: tb, cfg: cfg, ds: newDataset(cfg), profDir: filepath.Join(out, "profiles")}
	if cfg.Profiles {
		if !cfg.partial() {
			// A partial run keeps the full run's profiles (scenario 8 takes none).
			_ = os.RemoveAll(e.profDir)
		}
		// The directory is not in git: a partial run on a fresh checkout creates it too.
		if err := os.MkdirAll(e.profDir, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	r := &Report{Started: time.Now(), Command: command, Config: cfg, Machine: machine(cfg.OutDir), LoadAverageBefore: loadAverage(), SpeedBefore: machineSpeed()}
	stealBefore, totalBefore, stealKnown := cpuSteal()
	e.report = r
	tb.Logf("bench: preset %s, N=%d V=%d L=%d; load average %s", cfg.Preset, cfg.Objects, cfg.Namespaces, cfg.Locations, r.LoadAverageBefore)

	e.source = framework.StartControlPlane(tb, framework.ControlPlaneOptions{
		Name: "source",
		// Profiling for the report's profiles; more in-flight mutations for the parallel load.
		ExtraArgs: []string{"--profiling=true", "--max-mutating-requests-inflight=400"},
	})
	e.setupSourceClients()

	byID := map[int]*Scenario{}
	if cfg.runs(5) {
		e.runDataSetScenarios(ctx, byID)
	}
	if cfg.runs(11) {
		// Right after the data set's scenarios, on the same mapper-apiserver (or one of its own in
		// a partial run), before 8 and 10 register SyncTargets and start mapper-controller.
		byID[11] = e.scenarioStatusStorm(ctx)
	}
	if cfg.runs(8) {
		byID[8] = e.scenarioLocations(ctx)
	}
	if cfg.runs(10) {
		byID[10] = e.scenarioPlacement(ctx)
	}
	for id := 1; id <= lastScenario; id++ {
		if s, ok := byID[id]; ok {
			r.Scenarios = append(r.Scenarios, s)
		}
	}
	// Stop the servers before the micro-benchmarks so that they have the machine to themselves.
	for _, p := range framework.Processes() {
		_ = p.Stop()
	}
	if cfg.MicroBenchmarks && !cfg.partial() {
		r.Micro = runMicro(ctx, tb, cfg.MicroBenchtime)
	}
	r.Finished = time.Now()
	r.Seconds = r.Finished.Sub(r.Started).Seconds()
	r.LoadAverageAfter = loadAverage()
	r.SpeedAfter = machineSpeed()
	if stealAfter, totalAfter, ok := cpuSteal(); ok && stealKnown && totalAfter > totalBefore {
		// Reported only when there was some: zero is left out of the report (omitempty).
		r.StealPercent = 100 * float64(stealAfter-stealBefore) / float64(totalAfter-totalBefore)
	}
	written := r
	if cfg.partial() {
		// A subset: merge into the report of the full run in out, keeping its other scenarios.
		if written, err = mergeIntoExisting(out, r); err != nil {
			tb.Fatal(err)
		}
	}
	if err := written.write(out); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("wrote %s and %s (%.1f minutes)", filepath.Join(out, "RESULTS.md"), filepath.Join(out, "results.json"), r.Seconds/60)
	return r
}

// runDataSetScenarios loads the data set and runs scenarios 1-7 and 9 on it into byID, or only 5
// and 4 when the configuration runs no other of them (their order matters: 5 and 4 measure
// start-up and memory before the others fill the caches).
func (e *env) runDataSetScenarios(ctx context.Context, byID map[int]*Scenario) {
	r, cfg, tb := e.report, e.cfg, e.tb
	tb.Logf("loading %d namespaces and %d objects with %d clients", cfg.Namespaces, cfg.Objects, cfg.LoadClients)
	r.Load = e.load(ctx)
	tb.Logf("loaded in %.1fs (%.0f objects/s)", r.Load.Seconds, r.Load.ObjectsPerSec)

	s5 := e.scenarioStartup(ctx)
	byID[5] = s5
	after := e.sampleMemory(ctx, "after start-up and sync")
	heap := e.heapProfile(ctx, e.maTarget(), "s4-heap-after-sync-mapper-apiserver", "scenario 4, after sync, after a forced GC")
	s4 := e.scenarioMemory(ctx, after, heap)
	byID[4] = s4
	if !cfg.runs(1) {
		return
	}

	byID[1] = e.scenarioList(ctx)
	byID[2] = e.scenarioFanout(ctx)
	byID[3] = e.scenarioEncodeOnce(ctx)
	byID[7] = e.scenarioResume(ctx)

	end := e.sampleMemory(ctx, "end of scenarios 1, 2, 3 and 7 (JSON and watch frames cached, history full, scenario 2's watch set added)")
	// The JSON the cache holds now: the data set after the writes, and scenario 2's watch set.
	endJSON, _ := e.sourceJSONBytes(ctx)
	s4.addMemoryRow(end, endJSON)
	if p := e.heapProfile(ctx, e.maTarget(), "s4-heap-end-mapper-apiserver", "scenario 4, after scenarios 1-3 and 7, after a forced GC"); p != nil {
		s4.Profiles = append(s4.Profiles, *p)
	}

	byID[6] = e.scenarioMapper(ctx)
	// Last: its Customizations change what the views show.
	byID[9] = e.scenarioCustomized(ctx, byID[1], byID[2], end)
}

// Micro holds the output of the pkg/cache Go micro-benchmarks.
type Micro struct {
	Command string `json:"command"`
	Output  string `json:"output"`
}

// runMicro runs the micro-benchmarks of pkg/cache.
func runMicro(ctx context.Context, tb framework.TB, benchtime string) *Micro {
	args := []string{"test", "-run", "^$", "-bench", ".", "-benchmem", "-benchtime=" + benchtime, "./pkg/cache"}
	m := &Micro{Command: "go " + strings.Join(args, " ")}
	tb.Logf("running %s", m.Command)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = moduleRoot(tb)
	out, err := cmd.CombinedOutput()
	m.Output = string(out)
	if err != nil {
		m.Output += fmt.Sprintf("\n(failed: %v)\n", err)
	}
	return m
}

// moduleRoot returns the directory of go.mod above the working directory.
func moduleRoot(tb framework.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// machine describes this machine and the source revision; changes below outDir (the report's
// own files) do not count as uncommitted changes.
func machine(outDir string) Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), Kube: framework.KubeVersion, Etcd: framework.EtcdVersion}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var kb float64
			if n, _ := fmt.Sscanf(sc.Text(), "MemTotal: %f kB", &kb); n == 1 {
				m.MemoryGiB = kb / (1 << 20)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.GitRevision = strings.TrimSpace(string(out))
		// The report's own files (outDir) are not source: a previous run leaves them changed.
		status := []string{"status", "--porcelain", "--untracked-files=no", "--", "."}
		if outDir != "" {
			status = append(status, ":(exclude)"+outDir)
		}
		if st, err := exec.Command("git", status...).Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
			m.GitRevision += " (with uncommitted changes)"
		}
	}
	return m
}

// loadAverage returns /proc/loadavg's 1, 5 and 15 minute load averages.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
