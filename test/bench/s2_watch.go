package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// watchSet is a set of open watches.
type watchSet struct {
	streams []*watchStream
	// perKey counts the watches of each resource on each location (watchKey).
	perKey map[string]int
}

// stop ends every watch.
func (ws *watchSet) stop() {
	if ws == nil {
		return
	}
	var wg sync.WaitGroup
	for _, w := range ws.streams {
		wg.Add(1)
		go func(w *watchStream) { defer wg.Done(); w.stop() }(w)
	}
	wg.Wait()
}

// currentRV returns the resourceVersion a server's cache is at for ConfigMaps (currentRVOf).
func (e *env) currentRV(ctx context.Context, view bool) uint64 {
	return e.currentRVOf(ctx, view, configMaps)
}

// currentRVOf returns the resourceVersion a server's cache is at for res: a LIST with limit=1
// and resourceVersion=0 of the view (any location) or of kube-apiserver.
func (e *env) currentRVOf(ctx context.Context, view bool, r benchResource) uint64 {
	u := e.source.URL + r.path() + "?limit=1&resourceVersion=0"
	c := e.kaHTTP
	if view {
		u = e.viewURL(e.ds.locations[0]) + r.path() + "?limit=1&resourceVersion=0"
		c = e.maHTTP
	}
	res, err := timedGet(ctx, c, u, true)
	if err != nil {
		e.tb.Fatalf("reading the current resourceVersion of %s: %v", r.name, err)
	}
	var l struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(res.Body, &l); err != nil {
		e.tb.Fatal(err)
	}
	rv, err := strconv.ParseUint(l.Metadata.ResourceVersion, 10, 64)
	if err != nil {
		e.tb.Fatalf("resourceVersion %q: %v", l.Metadata.ResourceVersion, err)
	}
	return rv
}

// watchURL returns the URL of a ConfigMap watch of location from rv (resourceWatchURL).
func (e *env) watchURL(view bool, loc string, rv uint64) string {
	return e.resourceWatchURL(view, configMaps, loc, rv)
}

// resourceWatchURL returns the URL of a watch of res on location from rv on the view or, with a
// label selector, on kube-apiserver. Bookmarks are allowed, as client-go's informers ask.
func (e *env) resourceWatchURL(view bool, res benchResource, loc string, rv uint64) string {
	q := fmt.Sprintf("watch=true&allowWatchBookmarks=true&timeoutSeconds=3600&resourceVersion=%d", rv)
	if view {
		return e.viewURL(loc) + res.path() + "?" + q
	}
	return e.source.URL + res.path() + "?" + q + "&labelSelector=" + url.QueryEscape(LocationLabel(loc))
}

// openWatchers opens one watch per entry of locs (a location may repeat), each on its own
// connection as separate mapper processes would, from the server's current resourceVersion
// (or from the given one when rv > 0).
func (e *env) openWatchers(ctx context.Context, view bool, locs []string, rv uint64) *watchSet {
	if rv == 0 {
		rv = e.currentRV(ctx, view)
	}
	return e.openWatchSet(ctx, view, locs, []benchResource{configMaps}, func(_ int, _ benchResource, loc string) string {
		return e.watchURL(view, loc, rv)
	})
}

// phase is one write phase: writes at a fixed rate while a set of watchers (possibly none)
// watches, with the CPU of every process measured over it.
type phase struct {
	name      string
	watchers  int
	writes    writeResult
	cpu       map[string]float64
	seconds   float64
	expected  int
	delivered int
	// early counts events that reached a watcher before the writer had the write's response.
	early   int
	latency stats
	// fromRequest is the latency from the start of the write request (an upper bound that
	// includes the source's write latency).
	fromRequest stats
	bytes       int64
	bookmarks   int64
	errors      []string
	profiles    []*Profile
}

// runPhase runs writes following plan for d while ws watches, then waits (at most 10 s) until
// every expected event arrived, and measures CPU over writes and drain. Profiles of the given
// targets cover the write window.
func (e *env) runPhase(ctx context.Context, name string, ws *watchSet, d time.Duration, seed int64, plan writePlan, profs map[profileTarget]string) *phase {
	p := &phase{name: name}
	var waits []func() *Profile
	for t, pname := range profs {
		waits = append(waits, e.startCPUProfile(ctx, t, pname, name, int(d.Seconds())))
	}
	cpu0 := e.cpu()
	t0 := time.Now()
	p.writes = e.runWrites(ctx, d, seed, plan)
	acks := make(map[uint64]time.Time, len(p.writes.records))
	starts := make(map[uint64]time.Time, len(p.writes.records))
	for _, r := range p.writes.records {
		acks[r.rv] = r.ack
		starts[r.rv] = r.start
	}
	if ws != nil {
		p.watchers = len(ws.streams)
		p.expected = expectedDeliveries(p.writes.records, ws.perKey)
		deadline := time.Now().Add(10 * time.Second)
		for {
			n := 0
			for _, w := range ws.streams {
				for _, r := range w.received() {
					if _, ok := acks[r.rv]; ok {
						n++
					}
				}
			}
			if n >= p.expected || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	cpu1 := e.cpu()
	p.seconds = time.Since(t0).Seconds()
	p.cpu = cpuDelta(cpu0, cpu1)
	if ws != nil {
		var lat, fromReq []float64
		for _, w := range ws.streams {
			for _, r := range w.received() {
				ack, ok := acks[r.rv]
				if !ok {
					continue
				}
				p.delivered++
				l := r.at.Sub(ack)
				if l < 0 {
					p.early++
					l = 0
				}
				lat = append(lat, ms(l))
				fromReq = append(fromReq, ms(r.at.Sub(starts[r.rv])))
			}
			p.bytes += w.bytes.Load()
			p.bookmarks += w.bookmarks.Load()
			if err := w.error(); err != nil {
				p.errors = append(p.errors, fmt.Sprintf("%s: %v", w.name, err))
			}
		}
		p.latency = summarize(lat)
		p.fromRequest = summarize(fromReq)
		if p.delivered != p.expected {
			e.logMissing(ws, p.writes.records)
		}
	}
	for _, w := range waits {
		if pr := w(); pr != nil {
			p.profiles = append(p.profiles, pr)
		}
	}
	e.logf("  %s: %d writes in %.1fs, %d/%d events, p50 %.1f ms p99 %.1f ms, CPU: mapper-apiserver %.2fs kube-apiserver %.2fs etcd %.2fs bench %.2fs",
		name, len(p.writes.records), p.seconds, p.delivered, p.expected, p.latency.P50, p.latency.P99,
		p.cpu["mapper-apiserver"], p.cpu["kube-apiserver"], p.cpu["etcd"], p.cpu["bench"])
	return p
}

// logMissing logs, for diagnosis, up to 10 events a watcher (of its resource on the location it
// is named after) was owed and did not get, and events it got twice.
func (e *env) logMissing(ws *watchSet, records []writeRecord) {
	logged := 0
	for _, w := range ws.streams {
		got := map[uint64]int{}
		for _, r := range w.received() {
			got[r.rv]++
		}
		for _, rec := range records {
			if rec.resource != w.resource || !hasString(union(rec.oldLocs, rec.newLocs), w.name) {
				continue
			}
			if n := got[rec.rv]; n != 1 && logged < 10 {
				logged++
				e.logf("  watcher of %s on %s got the event of rv %d %d times (object %s/%s, locations %v -> %v)",
					w.resource, w.name, rec.rv, n, e.ds.objects[rec.idx].namespace, e.ds.objects[rec.idx].name, rec.oldLocs, rec.newLocs)
			}
		}
	}
}

// phaseRow renders a phase for a detail table.
func phaseRow(p *phase) []string {
	return []string{p.name, fmt.Sprint(p.watchers), fmt.Sprint(len(p.writes.records)), fmt.Sprintf("%d/%d", p.delivered, p.expected),
		fmtNum(p.latency.P50), fmtNum(p.latency.P99), fmtNum(p.latency.Max), fmtNum(p.fromRequest.P50), fmtNum(p.fromRequest.P99),
		fmtNum(p.cpu["mapper-apiserver"]), fmtNum(p.cpu["kube-apiserver"]), fmtNum(p.cpu["etcd"]), fmtNum(p.cpu["bench"]),
		fmt.Sprint(p.bookmarks)}
}

var phaseHeader = []string{"phase", "watchers", "writes", "events delivered/expected", "p50 ms", "p99 ms", "max ms", "p50 ms from request", "p99 ms from request",
	"CPU s mapper-apiserver", "CPU s kube-apiserver", "CPU s etcd", "CPU s bench client", "bookmarks"}

// phaseNotes reports lost events and watch errors.
func phaseNotes(ps ...*phase) []string {
	var out []string
	for _, p := range ps {
		if p.delivered < p.expected {
			out = append(out, fmt.Sprintf("**%s: %d of %d expected events did not arrive.**", p.name, p.expected-p.delivered, p.expected))
		}
		if len(p.errors) > 0 {
			out = append(out, fmt.Sprintf("**%s: %d watches ended with an error**, e.g. %s", p.name, len(p.errors), p.errors[0]))
		}
		if p.writes.failures > 0 {
			out = append(out, fmt.Sprintf("**%s: %d writes failed.**", p.name, p.writes.failures))
		}
		if p.early > 0 {
			out = append(out, fmt.Sprintf("%s: %d events (%.1f%%) reached their watcher before the writer had read the write's response; counted as 0 ms.",
				p.name, p.early, 100*float64(p.early)/float64(max(p.delivered, 1))))
		}
	}
	return out
}

// scenarioFanout is scenario 2: one watcher per location, writes at a fixed rate; delivery
// latency and serving CPU per 1000 events, view vs label-selector watches on kube-apiserver.
// Then the 10-resource part (s2_resources.go): every location watches 10 resources, idle (memory
// per watch) and under writes spread over them.
func (e *env) scenarioFanout(ctx context.Context) *Scenario {
	s := &Scenario{ID: 2, Title: "Watch fan-out", Ran: true}
	start := time.Now()
	d := e.cfg.FanoutDuration
	plan := e.randomWrites(e.cfg.AssignmentWritePercent)
	seed := e.cfg.Seed + 202

	e.logf("scenario 2: baseline (writes, no benchmark watchers)")
	base := e.runPhase(ctx, "baseline: writes only", nil, d, seed, plan,
		map[profileTarget]string{e.maTarget(): "s2-baseline-mapper-apiserver"})

	e.logf("scenario 2: %d view watchers", len(e.ds.locations))
	ws := e.openWatchers(ctx, true, e.ds.locations, 0)
	view := e.runPhase(ctx, fmt.Sprintf("%d view watches", len(ws.streams)), ws, d, seed+1, plan,
		map[profileTarget]string{e.maTarget(): "s2-fanout-mapper-apiserver"})
	ws.stop()
	time.Sleep(2 * time.Second)

	e.logf("scenario 2: %d kube-apiserver label-selector watchers", len(e.ds.locations))
	ws = e.openWatchers(ctx, false, e.ds.locations, 0)
	kube := e.runPhase(ctx, fmt.Sprintf("%d kube-apiserver label-selector watches", len(ws.streams)), ws, d, seed+2, plan,
		map[profileTarget]string{e.kaTarget(): "s2-fanout-kube-apiserver"})
	ws.stop()
	time.Sleep(2 * time.Second)

	rf := e.runResourceFanout(ctx)

	oursTotal, oursMarginal, kubeTotal, kubeMarginal := cpuPer1000(base, view, kube)

	s.What = fmt.Sprintf("One watcher per location (%d watches of ConfigMaps, each on its own connection, with bookmarks allowed, as "+
		"%d mapper processes would), while the source takes %.0f writes/s for %s (%d%% change an object's assignment and its labels, "+
		"the rest its data). Latency is from the write's acknowledgement at the writer to the event at the watcher (same client "+
		"process, same clock; an event that arrives before the writer has read the response counts as 0 ms), and, as an upper bound, "+
		"from the start of the write request. CPU is measured from /proc over the write window plus the drain. A baseline phase with the same "+
		"writes and no benchmark watchers gives each server's cost of the writes themselves; the *marginal* figures subtract it "+
		"(scaled to the phase length). mapper-apiserver's *total* includes ingesting the source's watch, so it is its whole cost.",
		len(e.ds.locations), len(e.ds.locations), e.cfg.WriteRate, d, e.cfg.AssignmentWritePercent)
	s.Comparisons = []Comparison{
		{Metric: "delivery latency p50", Unit: "ms", Ours: view.latency.P50, Alternative: "kube-apiserver label-selector watches", AltValue: kube.latency.P50, LowerIsBetter: true},
		{Metric: "delivery latency p99", Unit: "ms", Ours: view.latency.P99, Alternative: "kube-apiserver label-selector watches", AltValue: kube.latency.P99, LowerIsBetter: true},
		{Metric: "delivery latency p99 from the write request's start", Unit: "ms", Ours: view.fromRequest.P99, Alternative: "kube-apiserver label-selector watches", AltValue: kube.fromRequest.P99, LowerIsBetter: true},
		{Metric: "serving CPU per 1000 events (ours total vs kube-apiserver marginal)", Unit: "CPU s", Ours: oursTotal, Alternative: "kube-apiserver, marginal over its baseline", AltValue: kubeMarginal, LowerIsBetter: true},
		{Metric: "serving CPU per 1000 events (both marginal)", Unit: "CPU s", Ours: oursMarginal, Alternative: "kube-apiserver, marginal over its baseline", AltValue: kubeMarginal, LowerIsBetter: true},
		{Metric: "serving CPU per 1000 events (both total)", Unit: "CPU s", Ours: oursTotal, Alternative: "kube-apiserver, total (includes serving the writes)", AltValue: kubeTotal, LowerIsBetter: true},
		{Metric: "watch bytes received per event", Unit: "B", Ours: float64(view.bytes) / float64(max(view.delivered, 1)), Alternative: "kube-apiserver label-selector watches", AltValue: float64(kube.bytes) / float64(max(kube.delivered, 1)), LowerIsBetter: true},
	}
	s.Targets = []Target{
		atMost(fmt.Sprintf("delivery p99 ≤ 100 ms with %d watchers at %.0f writes/s", len(e.ds.locations), e.cfg.WriteRate), view.latency.P99, 100, "%.1f ms"),
		atMost("serving CPU per 1000 events ≤ 1/5 of kube-apiserver's (ours total / kube-apiserver marginal)", oursTotal/kubeMarginal, 0.2, "%.3f"),
	}
	s.What += " " + rf.what(e.cfg)
	s.Comparisons = append(s.Comparisons, rf.comparisons()...)
	s.Targets = append(s.Targets, rf.targets(e.cfg)...)
	s.Checks = append(s.Checks, deliveryCheck(view, rf.view))
	s.Tables = []Table{{Title: "Phases:", Header: phaseHeader, Rows: [][]string{phaseRow(base), phaseRow(view), phaseRow(kube),
		phaseRow(rf.base), phaseRow(rf.view), phaseRow(rf.kube)}}, rf.memoryTable()}
	s.Notes = append(s.Notes, phaseNotes(base, view, kube, rf.base, rf.view, rf.kube)...)
	s.Notes = append(s.Notes, fmt.Sprintf("Write latency at the source (request to response): p50 %.1f ms, p99 %.1f ms in the view phase, p50 %.1f ms, p99 %.1f ms in the kube-apiserver phase.",
		view.writes.latency.P50, view.writes.latency.P99, kube.writes.latency.P50, kube.writes.latency.P99))
	s.Notes = append(s.Notes, rf.notes()...)
	for _, p := range []*phase{base, view, kube, rf.view, rf.kube} {
		for _, pr := range p.profiles {
			s.Profiles = append(s.Profiles, *pr)
		}
	}
	for _, idle := range []idleCost{rf.viewIdle, rf.kubeIdle} {
		if idle.profile != nil {
			s.Profiles = append(s.Profiles, *idle.profile)
		}
	}
	s.Seconds = time.Since(start).Seconds()
	return s
}

// cpuPer1000 returns the serving CPU seconds per 1000 delivered events of mapper-apiserver in the
// view phase and of kube-apiserver in the kube phase, each total and marginal over the baseline
// phase of the same writes without watchers (scaled to the phase's length).
func cpuPer1000(base, view, kube *phase) (oursTotal, oursMarginal, kubeTotal, kubeMarginal float64) {
	per1000 := func(cpu float64, events int) float64 { return cpu / float64(max(events, 1)) * 1000 }
	oursTotal = per1000(view.cpu["mapper-apiserver"], view.delivered)
	oursMarginal = per1000(view.cpu["mapper-apiserver"]-base.cpu["mapper-apiserver"]*view.seconds/base.seconds, view.delivered)
	kubeTotal = per1000(kube.cpu["kube-apiserver"], kube.delivered)
	kubeMarginal = per1000(kube.cpu["kube-apiserver"]-base.cpu["kube-apiserver"]*kube.seconds/base.seconds, kube.delivered)
	return
}
