package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Report is the outcome of a benchmark run; it is written as results.json and rendered as
// RESULTS.md.
type Report struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Seconds  float64   `json:"seconds"`
	// Command is the command line that produced the report.
	Command string  `json:"command"`
	Machine Machine `json:"machine"`
	// LoadAverageBefore and LoadAverageAfter are /proc/loadavg before and after the run: other
	// work on the machine shows here.
	LoadAverageBefore string `json:"loadAverageBefore"`
	LoadAverageAfter  string `json:"loadAverageAfter"`
	// SpeedBefore and SpeedAfter are the machine's single-core speed before and after the run
	// (machineSpeed); with StealPercent, they tell a slow run from slow code.
	SpeedBefore float64 `json:"singleCoreMBpsBefore,omitempty"`
	SpeedAfter  float64 `json:"singleCoreMBpsAfter,omitempty"`
	// StealPercent is the share of the machine's CPU time during the run that the hypervisor
	// gave to others (steal in /proc/stat); 0 when there was none or it is unknown.
	StealPercent float64     `json:"cpuStealPercent,omitempty"`
	Config       Config      `json:"config"`
	Load         LoadResult  `json:"load"`
	Scenarios    []*Scenario `json:"scenarios"`
	Micro        *Micro      `json:"microBenchmarks,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPU         string  `json:"cpu"`
	Cores       int     `json:"cores"`
	MemoryGiB   float64 `json:"memoryGiB"`
	Kernel      string  `json:"kernel"`
	Go          string  `json:"go"`
	Kube        string  `json:"kubeApiserver"`
	Etcd        string  `json:"etcd"`
	GitRevision string  `json:"gitRevision,omitempty"`
}

// Scenario is one numbered scenario of the issue.
type Scenario struct {
	ID    int    `json:"id"`
	Title string `json:"title"`
	// Subject names the component whose figures are "ours" (the column header); empty means
	// mapper-apiserver.
	Subject string `json:"subject,omitempty"`
	// Separate describes the run that produced this scenario when it is not the report's run
	// (a run of a subset, merged into the report of a full run).
	Separate *SeparateRun `json:"separateRun,omitempty"`
	// What says what was measured and how.
	What string `json:"what"`
	// Ran is false when the scenario could not run; Reason says why.
	Ran    bool   `json:"ran"`
	Reason string `json:"reason,omitempty"`

	Comparisons []Comparison `json:"comparisons,omitempty"`
	Targets     []Target     `json:"targets,omitempty"`
	Checks      []Check      `json:"checks,omitempty"`
	Tables      []Table      `json:"tables,omitempty"`
	Profiles    []Profile    `json:"profiles,omitempty"`
	Notes       []string     `json:"notes,omitempty"`
	Seconds     float64      `json:"seconds"`
}

// Comparison is one figure of ours next to the alternative's.
type Comparison struct {
	Metric string `json:"metric"`
	Unit   string `json:"unit"`
	// Ours is mapper-apiserver's figure.
	Ours float64 `json:"ours"`
	// Alternative names what we compare with; AltValue is its figure (NaN: none).
	Alternative string  `json:"alternative,omitempty"`
	AltValue    float64 `json:"altValue"`
	// LowerIsBetter says which direction is good.
	LowerIsBetter bool `json:"lowerIsBetter"`
}

// MarshalJSON writes NaN as null.
func (c Comparison) MarshalJSON() ([]byte, error) {
	type plain Comparison
	type out struct {
		plain
		AltValue *float64 `json:"altValue"`
		Ratio    *float64 `json:"ratio"`
	}
	o := out{plain: plain(c)}
	if !math.IsNaN(c.AltValue) && c.Alternative != "" {
		v := c.AltValue
		o.AltValue = &v
		if r := c.Ratio(); !math.IsNaN(r) && !math.IsInf(r, 0) {
			o.Ratio = &r
		}
	}
	return json.Marshal(o)
}

// UnmarshalJSON reads what MarshalJSON writes: a null altValue is NaN (no figure).
func (c *Comparison) UnmarshalJSON(b []byte) error {
	type plain Comparison
	var in struct {
		plain
		AltValue *float64 `json:"altValue"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*c = Comparison(in.plain)
	c.AltValue = math.NaN()
	if in.AltValue != nil {
		c.AltValue = *in.AltValue
	}
	return nil
}

// Ratio is ours divided by the alternative's.
func (c Comparison) Ratio() float64 {
	if c.Alternative == "" || math.IsNaN(c.AltValue) || c.AltValue == 0 {
		return math.NaN()
	}
	return c.Ours / c.AltValue
}

// Worse reports whether ours is worse than the alternative by more than 5% (closer figures are
// reported as they are, without the mark). A negative figure (a marginal cost below noise)
// makes the comparison meaningless and is never marked.
func (c Comparison) Worse() bool {
	r := c.Ratio()
	if math.IsNaN(r) || r < 0 || c.Ours < 0 || c.AltValue < 0 {
		return false
	}
	if c.LowerIsBetter {
		return r > 1.05
	}
	return r < 1/1.05
}

// Target is one goal of the issue, checked against a measured value.
type Target struct {
	Goal     string  `json:"goal"`
	Measured string  `json:"measured"`
	Met      bool    `json:"met"`
	Value    float64 `json:"value"`
	Limit    float64 `json:"limit"`
}

// Check is a correctness check a scenario made on what it measured: the figures mean nothing
// unless it passed (the view listed the right objects, the mapper finished). Unlike a Target,
// which is a goal for a timing, a failed Check makes the run wrong; TestQuickPreset fails on it.
type Check struct {
	// Name says what must hold.
	Name string `json:"name"`
	// Compared counts the comparisons made (lists, runs); Failures counts those that did not hold.
	Compared int `json:"compared"`
	Failures int `json:"failures"`
	// Detail describes the first failures.
	Detail string `json:"detail,omitempty"`
}

// Passed reports whether the check compared something and nothing failed: a check that
// compared nothing proves nothing.
func (c Check) Passed() bool { return c.Compared > 0 && c.Failures == 0 }

// atMost builds a target value <= limit.
func atMost(goal string, value, limit float64, format string) Target {
	return Target{Goal: goal, Measured: fmt.Sprintf(format, value), Met: value <= limit, Value: value, Limit: limit}
}

// atLeast builds a target value >= limit.
func atLeast(goal string, value, limit float64, format string) Target {
	return Target{Goal: goal, Measured: fmt.Sprintf(format, value), Met: value >= limit, Value: value, Limit: limit}
}

// Table is extra detail of a scenario.
type Table struct {
	Title  string     `json:"title"`
	Header []string   `json:"header"`
	Rows   [][]string `json:"rows"`
}

// SeparateRun describes a run of a subset of the scenarios (e.g. `--scenarios=8`) whose results
// were merged into the report of a full run.
type SeparateRun struct {
	Command           string    `json:"command"`
	Started           time.Time `json:"started"`
	Seconds           float64   `json:"seconds"`
	GitRevision       string    `json:"gitRevision,omitempty"`
	LoadAverageBefore string    `json:"loadAverageBefore"`
	LoadAverageAfter  string    `json:"loadAverageAfter"`
	// Config is the configuration of that run.
	Config Config `json:"config"`
}

// mergeIntoExisting reads results.json in dir (the report of a full run) and returns it with
// the scenarios of the partial run r replacing or joining its own, each marked with r's run;
// with no results.json in dir, r alone.
func mergeIntoExisting(dir string, r *Report) (*Report, error) {
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if os.IsNotExist(err) {
		return r, nil
	}
	if err != nil {
		return nil, err
	}
	var old Report
	if err := json.Unmarshal(b, &old); err != nil {
		return nil, fmt.Errorf("reading %s to merge into: %w", filepath.Join(dir, "results.json"), err)
	}
	return mergeReports(&old, r), nil
}

// mergeReports returns old with the scenarios of partial replacing those of the same id (or
// added in id order), each marked with partial's run.
func mergeReports(old, partial *Report) *Report {
	run := &SeparateRun{Command: partial.Command, Started: partial.Started, Seconds: partial.Seconds, GitRevision: partial.Machine.GitRevision,
		LoadAverageBefore: partial.LoadAverageBefore, LoadAverageAfter: partial.LoadAverageAfter, Config: partial.Config}
	byID := map[int]*Scenario{}
	for _, s := range old.Scenarios {
		byID[s.ID] = s
	}
	for _, s := range partial.Scenarios {
		s.Separate = run
		byID[s.ID] = s
	}
	ids := make([]int, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	merged := *old
	merged.Scenarios = nil
	for _, id := range ids {
		merged.Scenarios = append(merged.Scenarios, byID[id])
	}
	return &merged
}

// write writes results.json and RESULTS.md into dir.
func (r *Report) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "RESULTS.md"), []byte(r.Markdown()), 0o644)
}

// fmtNum formats a number with a sensible precision.
func fmtNum(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v == 0:
		return "0"
	case math.Abs(v) >= 1000:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.1f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.2f", v)
	case math.Abs(v) >= 0.1:
		return fmt.Sprintf("%.3f", v)
	default:
		return fmt.Sprintf("%.4f", v)
	}
}

func fmtRatio(c Comparison) string {
	r := c.Ratio()
	if math.IsNaN(r) {
		return "–"
	}
	s := ""
	switch {
	case r >= 100:
		s = fmt.Sprintf("%.0f×", r)
	case r >= 10:
		s = fmt.Sprintf("%.1f×", r)
	default:
		s = fmt.Sprintf("%.2f×", r)
	}
	if c.Worse() {
		s += " (worse)"
	}
	return s
}

// Markdown renders the report.
func (r *Report) Markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# cluster-mapper benchmark results\n\n")
	p("Generated by `%s` (test/bench, hack/bench) on %s; the run took %.1f minutes. ",
		r.Command, r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Seconds/60)
	p("Do not edit by hand: run `make bench` to regenerate this file and `results.json`.\n\n")

	p("## Machine and set-up\n\n")
	p("| | |\n|---|---|\n")
	p("| CPU | %s, %d cores |\n", r.Machine.CPU, r.Machine.Cores)
	p("| memory | %.1f GiB |\n", r.Machine.MemoryGiB)
	p("| kernel | %s |\n", r.Machine.Kernel)
	p("| Go | %s |\n", r.Machine.Go)
	p("| kube-apiserver / etcd | %s / %s (testenv, `make testenv`) |\n", r.Machine.Kube, r.Machine.Etcd)
	if r.Machine.GitRevision != "" {
		p("| source revision | %s |\n", r.Machine.GitRevision)
	}
	p("| load average before / after | %s / %s |\n", r.LoadAverageBefore, r.LoadAverageAfter)
	if r.SpeedBefore > 0 {
		p("| single-core speed before / after (SHA-256 of 64 MiB, best of 3) | %.0f / %.0f MB/s |\n", r.SpeedBefore, r.SpeedAfter)
	}
	if r.StealPercent > 0 {
		p("| CPU time taken by the hypervisor during the run (steal) | %.1f%% |\n", r.StealPercent)
	}
	p("| preset | `%s`: N=%d objects (%d%% Deployments), V=%d namespaces, L=%d locations, %d objects also in location `%s`; writes at %.0f/s (%d%% re-assignments) |\n",
		r.Config.Preset, r.Config.Objects, r.Config.DeploymentPercent, r.Config.Namespaces, r.Config.Locations, r.Load.BulkObjects, BulkLocation, r.Config.WriteRate, r.Config.AssignmentWritePercent)
	if r.Config.Scope != "" {
		p("| scenarios | %s |\n", r.Config.Scope)
	}
	p("\n")
	p("Every process is real and runs on this machine: etcd, the source kube-apiserver, mapper-apiserver " +
		"(and for scenario 6 a target kube-apiserver and the mapper), and this benchmark as the client. " +
		"Latency is measured at the client, CPU time and RSS from `/proc/<pid>`. All servers share the same cores, " +
		"so the client's own CPU competes with the servers; it is reported where it matters. " +
		"Requests use JSON without compression on both sides (views serve no protobuf), with an admin client " +
		"certificate (system:masters) straight to each server.\n\n")

	p("## Data set\n\n")
	p("%d namespaces, %d ConfigMaps (about 1–2 KiB each as stored, with managedFields) and %d Deployments, "+
		"loaded by %d parallel clients (one connection each) in %.1f s: **%.0f objects/s** (%d retried requests). "+
		"Each object is assigned to 1–3 of the %d locations by `kcp.io/assigned-locations` and carries the label "+
		"`%s<location>` for every assigned location. Objects per location: p50 %.0f, p99 %.0f, max %.0f; "+
		"location `%s`: %d objects.\n\n",
		r.Load.Namespaces, r.Load.ConfigMaps, r.Load.Deployments, r.Load.Clients, r.Load.Seconds, r.Load.ObjectsPerSec, r.Load.Retries,
		r.Config.Locations, LocationLabelPrefix, r.Load.LocationObjects.P50, r.Load.LocationObjects.P99, r.Load.LocationObjects.Max,
		BulkLocation, r.Load.BulkObjects)

	p("## Targets\n\n| scenario | target | measured | met |\n|---|---|---|---|\n")
	for _, s := range r.Scenarios {
		if !s.Ran {
			p("| %d. %s | (not run) | %s | – |\n", s.ID, s.Title, s.Reason)
			continue
		}
		for _, t := range s.Targets {
			met := "**no**"
			if t.Met {
				met = "yes"
			}
			p("| %d. %s | %s | %s | %s |\n", s.ID, s.Title, t.Goal, t.Measured, met)
		}
	}
	p("\n")

	for _, s := range r.Scenarios {
		p("## %d. %s\n\n", s.ID, s.Title)
		if !s.Ran {
			p("**Not run:** %s\n\n", s.Reason)
			continue
		}
		if sr := s.Separate; sr != nil {
			p("Run separately by `%s` on %s (%.1f minutes; source revision %s; load average before / after %s / %s) and merged into this report.\n\n",
				sr.Command, sr.Started.UTC().Format("2006-01-02 15:04 MST"), sr.Seconds/60, sr.GitRevision, sr.LoadAverageBefore, sr.LoadAverageAfter)
		}
		if s.What != "" {
			p("%s\n\n", s.What)
		}
		subject := s.Subject
		if subject == "" {
			subject = "mapper-apiserver"
		}
		if len(s.Comparisons) > 0 {
			p("| metric | %s | alternative | alternative's figure | ours / alternative |\n|---|---|---|---|---|\n", subject)
			for _, c := range s.Comparisons {
				alt, altV := "–", "–"
				if c.Alternative != "" {
					alt, altV = c.Alternative, fmtNum(c.AltValue)+" "+c.Unit
				}
				p("| %s | %s %s | %s | %s | %s |\n", c.Metric, fmtNum(c.Ours), c.Unit, alt, altV, fmtRatio(c))
			}
			p("\n")
		}
		if len(s.Targets) > 0 {
			for _, t := range s.Targets {
				met := "**not met**"
				if t.Met {
					met = "met"
				}
				p("- Target: %s — measured %s: %s.\n", t.Goal, t.Measured, met)
			}
			p("\n")
		}
		for _, c := range s.Checks {
			res := "passed"
			if !c.Passed() {
				res = fmt.Sprintf("**FAILED** (%d of %d)", c.Failures, c.Compared)
			}
			p("- Check: %s — %d compared: %s.", c.Name, c.Compared, res)
			if c.Detail != "" && !c.Passed() {
				p(" %s", c.Detail)
			}
			p("\n")
		}
		if len(s.Checks) > 0 {
			p("\n")
		}
		var worse []string
		for _, c := range s.Comparisons {
			if c.Worse() {
				worse = append(worse, fmt.Sprintf("%s (%s vs %s %s)", c.Metric, fmtNum(c.Ours)+" "+c.Unit, fmtNum(c.AltValue)+" "+c.Unit, c.Alternative))
			}
		}
		if len(worse) > 0 {
			p("**Worse than the alternative:** %s.", strings.Join(worse, "; "))
			if len(s.Profiles) > 0 {
				p(" The profiles below show where the CPU goes.")
			}
			p("\n\n")
		}
		for _, n := range s.Notes {
			p("- %s\n", n)
		}
		if len(s.Notes) > 0 {
			p("\n")
		}
		for _, t := range s.Tables {
			p("%s\n\n| %s |\n|%s\n", t.Title, strings.Join(t.Header, " | "), strings.Repeat("---|", len(t.Header)))
			for _, row := range t.Rows {
				p("| %s |\n", strings.Join(row, " | "))
			}
			p("\n")
		}
		for _, pr := range s.Profiles {
			p("%s\n", pr.Markdown())
		}
	}
	if r.Micro != nil {
		p("## Go micro-benchmarks of pkg/cache\n\n`%s` (run after the servers were stopped):\n\n```\n%s```\n\n", r.Micro.Command, r.Micro.Output)
	}
	return b.String()
}
