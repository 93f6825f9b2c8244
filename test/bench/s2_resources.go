package bench

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// Scenario 2's second part: every location watches all 10 mirrored
// resources (benchResources) at once, L×10 watches, idle first (memory per watch) and then under
// writes spread over the 10 resources (delivery latency, CPU per event), on the views and, for
// comparison, with the same label-selector watches on kube-apiserver.

// viewWatchersMetric is mapper-apiserver's gauge of open location-view watches (pkg/cache).
const viewWatchersMetric = "mapper_apiserver_watchers"

// kubeWatchesMetric is kube-apiserver's gauge of long-running requests; its WATCH series of the
// mirrored resources count the open watches.
const kubeWatchesMetric = "apiserver_longrunning_requests"

// watchWait bounds how long the servers may take to register a set of watches or to end one.
const watchWait = 2 * time.Minute

// resourceFanout is the outcome of the part: the phases and the memory of the idle watches.
type resourceFanout struct {
	locations, watches int
	setObjects         int
	setSeconds         float64
	// openSeconds is how long opening the view watches took, until the server counted them all.
	openSeconds        float64
	base, view, kube   *phase
	viewIdle, kubeIdle idleCost
}

// idleCost is the memory a server holds for a set of idle watches: after minus before, after a
// forced garbage collection each time; profile is the server's heap profile with the watches
// open (nil without profiles).
type idleCost struct {
	before, after serverMemory
	profile       *Profile
}

// perWatch returns the cost per watch of n watches in bytes: RSS, Go heap and stacks, and
// goroutines.
func (c idleCost) perWatch(n int) (rss, goMem, goroutines float64) {
	d := float64(max(n, 1))
	return float64(c.after.rss-c.before.rss) / d,
		(c.after.heapInuse + c.after.stackInuse - c.before.heapInuse - c.before.stackInuse) / d,
		(c.after.goroutines - c.before.goroutines) / d
}

// stacksPerWatch returns the growth of the goroutine stacks per watch of n watches, in bytes.
func (c idleCost) stacksPerWatch(n int) float64 {
	return (c.after.stackInuse - c.before.stackInuse) / float64(max(n, 1))
}

// serverMemory is a server's memory at one moment: RSS from /proc, the Go runtime's figures from
// its /metrics (NaN when absent).
type serverMemory struct {
	rss                   int64
	heapInuse, stackInuse float64
	goroutines            float64
}

// sampleServer forces a garbage collection in mapper-apiserver (view) or kube-apiserver and
// reads its memory.
func (e *env) sampleServer(ctx context.Context, view bool) serverMemory {
	target, pid := e.kaTarget(), e.source.APIServer.PID
	if view {
		target, pid = e.maTarget(), e.mapper.Process.PID
	}
	if err := forceGC(ctx, target); err != nil {
		e.logf("forcing a GC in %s: %v", target.process, err)
	}
	// forceGC returns once the collection ran (the heap profile is written after it).
	m, err := scrapeMetrics(ctx, target.client, target.base+"/metrics")
	if err != nil {
		e.tb.Fatalf("reading %s metrics: %v", target.process, err)
	}
	ps, err := sampleProc(pid)
	if err != nil {
		e.tb.Fatal(err)
	}
	return serverMemory{rss: ps.RSS, heapInuse: metricOrNaN(m, "go_memstats_heap_inuse_bytes"),
		stackInuse: metricOrNaN(m, "go_memstats_stack_inuse_bytes"), goroutines: metricOrNaN(m, "go_goroutines")}
}

// watchCount returns the watches of the mirrored resources a server counts as open:
// mapper-apiserver's view watches, or kube-apiserver's WATCH requests of those resources (which
// include mapper-apiserver's own watches of the source).
func (e *env) watchCount(ctx context.Context, view bool) float64 {
	if view {
		m, err := scrapeMetrics(ctx, e.maHTTP, e.mapper.URL+"/metrics")
		if err != nil {
			e.tb.Fatalf("reading mapper-apiserver metrics: %v", err)
		}
		return m[viewWatchersMetric]
	}
	fams, err := scrapeFamilies(ctx, e.kaHTTP, e.source.URL+"/metrics")
	if err != nil {
		e.tb.Fatalf("reading kube-apiserver metrics: %v", err)
	}
	mirrored := map[string]bool{}
	for _, r := range benchResources {
		mirrored[r.gvr.Group+"/"+r.gvr.Resource] = true
	}
	n := 0.0
	if f, ok := fams[kubeWatchesMetric]; ok {
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["verb"] == "WATCH" && l["subresource"] == "" && mirrored[l["group"]+"/"+l["resource"]] {
				n += metricValue(m)
			}
		}
	}
	return n
}

// waitWatchCount polls watchCount until it is at least want (atMost: at most want), for at most
// watchWait, and returns the last count and whether it got there.
func (e *env) waitWatchCount(ctx context.Context, view bool, want float64, atMost bool) (float64, bool) {
	deadline := time.Now().Add(watchWait)
	for {
		n := e.watchCount(ctx, view)
		if (!atMost && n >= want) || (atMost && n <= want) {
			return n, true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return n, false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// openResourceWatchers opens, for every location of locs, one watch of each resource of
// benchResources from the server's current resourceVersion of that resource; a location's
// watches share one connection of their own (HTTP/2 streams), as one process per location
// watching the 10 resources with client-go would.
func (e *env) openResourceWatchers(ctx context.Context, view bool, locs []string) *watchSet {
	rvs := make([]uint64, len(benchResources))
	for i, res := range benchResources {
		rvs[i] = e.currentRVOf(ctx, view, res)
	}
	return e.openWatchSet(ctx, view, locs, benchResources, func(j int, res benchResource, loc string) string {
		return e.resourceWatchURL(view, res, loc, rvs[j])
	})
}

// openWatchSet opens, for every location of locs, one watch per resource of resources, whose
// URL url gives (j is the resource's index), 16 locations at a time. A location's watches share
// one connection of their own (HTTP/2 streams), opened one after the other so that the first
// request's connection carries them all. A failure stops every watch opened and fails the run.
func (e *env) openWatchSet(ctx context.Context, view bool, locs []string, resources []benchResource, url func(j int, res benchResource, loc string) string) *watchSet {
	cfg := e.source.AdminConfig()
	if view {
		cfg = e.mapperConfig()
	}
	ws := &watchSet{streams: make([]*watchStream, len(locs)*len(resources)), perKey: map[string]int{}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, 16)
	for i, loc := range locs {
		for _, res := range resources {
			ws.perKey[watchKey(res.name, loc)]++
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(i int, loc string) {
			defer wg.Done()
			defer func() { <-sem }()
			c, tr, err := dedicatedClient(cfg)
			for j, res := range resources {
				if err != nil {
					break
				}
				var w *watchStream
				if w, err = openWatch(ctx, loc, c, tr, url(j, res, loc)); err == nil {
					w.resource = res.name
					ws.streams[i*len(resources)+j] = w
				}
			}
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}(i, loc)
	}
	wg.Wait()
	if firstErr != nil {
		var open []*watchStream
		for _, w := range ws.streams {
			if w != nil {
				open = append(open, w)
			}
		}
		ws.streams = open
		ws.stop()
		e.tb.Fatalf("opening %d watches: %v", len(locs)*len(resources), firstErr)
	}
	return ws
}

// openIdle opens the watches of every location on every resource on one server, waits until the
// server counts them all, and measures its memory before and after.
func (e *env) openIdle(ctx context.Context, view bool) (*watchSet, idleCost, time.Duration) {
	var c idleCost
	n := float64(len(e.ds.locations) * len(benchResources))
	before := e.watchCount(ctx, view)
	if view {
		// No view watch is left from the earlier phases (they end asynchronously).
		var ok bool
		if before, ok = e.waitWatchCount(ctx, true, 0, true); !ok {
			e.logf("  mapper-apiserver still counts %.0f view watches", before)
		}
	}
	c.before = e.sampleServer(ctx, view)
	t0 := time.Now()
	ws := e.openResourceWatchers(ctx, view, e.ds.locations)
	if got, ok := e.waitWatchCount(ctx, view, before+n, false); !ok {
		ws.stop()
		e.tb.Fatalf("the server counts %.0f open watches, want %.0f", got, before+n)
	}
	opened := time.Since(t0)
	c.after = e.sampleServer(ctx, view)
	target, name := e.kaTarget(), "s2-idle-watches-kube-apiserver"
	if view {
		target, name = e.maTarget(), "s2-idle-watches-mapper-apiserver"
	}
	c.profile = e.heapProfile(ctx, target, name, fmt.Sprintf("scenario 2, %.0f idle watches open, after a forced GC", n))
	return ws, c, opened
}

// runResourceFanout creates the watch set, then measures a baseline of writes spread over the 10
// resources without watchers, the view watches (idle, then under the same writes) and the
// label-selector watches on kube-apiserver (likewise).
func (e *env) runResourceFanout(ctx context.Context) *resourceFanout {
	f := &resourceFanout{locations: len(e.ds.locations), watches: len(e.ds.locations) * len(benchResources)}
	e.logf("scenario 2: creating the watch set (%d objects of %d more resources)", len(e.ds.locations)*(len(benchResources)-2), len(benchResources)-2)
	set := e.createWatchSet(ctx)
	f.setObjects, f.setSeconds = set.objects, set.seconds
	d := e.cfg.FanoutDuration
	plan := e.resourceWrites(e.cfg.AssignmentWritePercent)
	seed := e.cfg.Seed + 222

	e.logf("scenario 2: baseline of writes over %d resources", len(benchResources))
	f.base = e.runPhase(ctx, fmt.Sprintf("baseline: writes over %d resources only", len(benchResources)), nil, d, seed, plan, nil)

	e.logf("scenario 2: %d view watchers (%d locations × %d resources)", f.watches, f.locations, len(benchResources))
	ws, idle, opened := e.openIdle(ctx, true)
	f.viewIdle, f.openSeconds = idle, opened.Seconds()
	f.view = e.runPhase(ctx, fmt.Sprintf("%d view watches (%d locations × %d resources)", f.watches, f.locations, len(benchResources)), ws, d, seed+1, plan,
		map[profileTarget]string{e.maTarget(): "s2-resources-mapper-apiserver"})
	ws.stop()

	e.logf("scenario 2: %d kube-apiserver label-selector watchers", f.watches)
	ws, idle, _ = e.openIdle(ctx, false)
	f.kubeIdle = idle
	f.kube = e.runPhase(ctx, fmt.Sprintf("%d kube-apiserver label-selector watches (%d locations × %d resources)", f.watches, f.locations, len(benchResources)), ws, d, seed+2, plan,
		map[profileTarget]string{e.kaTarget(): "s2-resources-kube-apiserver"})
	ws.stop()
	time.Sleep(2 * time.Second)
	return f
}

// deliveryCheck is the check that every view watch of the phases got each event it was owed,
// once, and ended without an error.
func deliveryCheck(ps ...*phase) Check {
	c := Check{Name: "every view watch got each event it was owed exactly once and no watch ended with an error"}
	for _, p := range ps {
		c.Compared += p.expected
		bad := int(math.Abs(float64(p.expected-p.delivered))) + len(p.errors)
		c.Failures += bad
		if bad > 0 {
			c.Detail += fmt.Sprintf("%s: %d of %d events delivered, %d watch errors. ", p.name, p.delivered, p.expected, len(p.errors))
		}
	}
	return c
}

// what describes the part for the scenario's text.
func (f *resourceFanout) what(cfg Config) string {
	return fmt.Sprintf("Then a mapper's real load: every location watches all %d mirrored resources at once (%s), %d watches; a location's %d "+
		"watches share one connection of their own (HTTP/2 streams), as one mapper process watching them with client-go would. The "+
		"%d resources besides ConfigMaps and Deployments hold a watch set of %d objects in %d namespaces of their own (one per location and "+
		"resource, owned by that location and assigned to 1–3 locations), created for this part after scenarios 5, 4 and 1 measured the "+
		"data set. The servers' own count of open watches (mapper-apiserver's `%s`, kube-apiserver's `%s{verb=\"WATCH\"}` of these "+
		"resources) proves the watches established. Memory per idle watch: with every watch open and no write since, minus before they "+
		"were opened, after a forced garbage collection each time, divided by the watches; RSS from /proc, the Go heap in use and "+
		"goroutine stacks from /metrics. Then the source takes %.0f writes/s for %s spread evenly over the %d resources (a random object of "+
		"a random resource; %d%% change its assignment, the others its data: a ConfigMap's data.rev, any other object's annotation `%s`), "+
		"measured as above against a baseline phase of the same writes without watchers. The one-watch-per-location figures above are kept.",
		len(benchResources), resourceNames(), f.watches, len(benchResources), len(benchResources)-2, f.setObjects, watchNamespaceCount,
		viewWatchersMetric, kubeWatchesMetric, cfg.WriteRate, cfg.FanoutDuration, len(benchResources), cfg.AssignmentWritePercent, RevAnnotation)
}

// label names the part's figures.
func (f *resourceFanout) label() string {
	return fmt.Sprintf("%d watches (%d locations × %d resources)", f.watches, f.locations, len(benchResources))
}

// comparisons are the part's figures next to kube-apiserver's.
func (f *resourceFanout) comparisons() []Comparison {
	alt := "kube-apiserver label-selector watches"
	oursTotal, oursMarginal, kubeTotal, kubeMarginal := cpuPer1000(f.base, f.view, f.kube)
	vRSS, vGo, vG := f.viewIdle.perWatch(f.watches)
	kRSS, kGo, kG := f.kubeIdle.perWatch(f.watches)
	l := f.label()
	return []Comparison{
		{Metric: "delivery latency p50, " + l, Unit: "ms", Ours: f.view.latency.P50, Alternative: alt, AltValue: f.kube.latency.P50, LowerIsBetter: true},
		{Metric: "delivery latency p99, " + l, Unit: "ms", Ours: f.view.latency.P99, Alternative: alt, AltValue: f.kube.latency.P99, LowerIsBetter: true},
		{Metric: "serving CPU per 1000 events, " + l + " (ours total vs kube-apiserver marginal)", Unit: "CPU s", Ours: oursTotal, Alternative: "kube-apiserver, marginal over its baseline", AltValue: kubeMarginal, LowerIsBetter: true},
		{Metric: "serving CPU per 1000 events, " + l + " (both marginal)", Unit: "CPU s", Ours: oursMarginal, Alternative: "kube-apiserver, marginal over its baseline", AltValue: kubeMarginal, LowerIsBetter: true},
		{Metric: "serving CPU per 1000 events, " + l + " (both total)", Unit: "CPU s", Ours: oursTotal, Alternative: "kube-apiserver, total (includes serving the writes)", AltValue: kubeTotal, LowerIsBetter: true},
		{Metric: "RSS per idle watch, " + l, Unit: "KiB", Ours: vRSS / 1024, Alternative: alt, AltValue: kRSS / 1024, LowerIsBetter: true},
		{Metric: "Go heap and stacks per idle watch, " + l, Unit: "KiB", Ours: vGo / 1024, Alternative: alt, AltValue: kGo / 1024, LowerIsBetter: true},
		{Metric: "goroutines per idle watch, " + l, Unit: "", Ours: vG, Alternative: alt, AltValue: kG, LowerIsBetter: true},
	}
}

// targets are those of the 10-resource part as it measured them.
func (f *resourceFanout) targets(cfg Config) []Target {
	oursTotal, _, _, kubeMarginal := cpuPer1000(f.base, f.view, f.kube)
	rss, _, _ := f.viewIdle.perWatch(f.watches)
	l := f.label()
	return []Target{
		atMost(fmt.Sprintf("delivery p99 ≤ 100 ms with %d view watches (%d locations × %d resources) at %.0f writes/s", f.watches, f.locations, len(benchResources), cfg.WriteRate),
			f.view.latency.P99, 100, "%.1f ms"),
		atMost("RSS per idle view watch ≤ 16 KiB, "+l, rss/1024, 16, "%.1f KiB"),
		atMost("serving CPU per 1000 events ≤ 1/5 of kube-apiserver's, "+l+" (ours total, with ingest / kube-apiserver marginal)", oursTotal/kubeMarginal, 0.2, "%.3f"),
	}
}

// memoryTable shows both servers' memory before and after opening the idle watches.
func (f *resourceFanout) memoryTable() Table {
	mib := func(b float64) string { return fmt.Sprintf("%.1f", b/(1<<20)) }
	row := func(name string, c idleCost) []string {
		rss, goMem, g := c.perWatch(f.watches)
		stacks := c.stacksPerWatch(f.watches)
		return []string{name, fmt.Sprint(f.watches), mib(float64(c.before.rss)), mib(float64(c.after.rss)), fmtNum(rss / 1024),
			mib(c.before.heapInuse + c.before.stackInuse), mib(c.after.heapInuse + c.after.stackInuse), fmtNum(goMem / 1024),
			fmtNum((goMem - stacks) / 1024), fmtNum(stacks / 1024),
			fmtNum(c.before.goroutines), fmtNum(c.after.goroutines), fmtNum(g)}
	}
	return Table{Title: "Idle watches (" + f.label() + "), after a forced GC before and after opening them:",
		Header: []string{"server", "watches", "RSS before MiB", "RSS after MiB", "RSS per watch KiB", "Go heap and stacks before MiB",
			"after MiB", "per watch KiB", "of which heap KiB", "of which stacks KiB", "goroutines before", "after", "per watch"},
		Rows: [][]string{row("mapper-apiserver (views)", f.viewIdle), row("kube-apiserver (label selectors)", f.kubeIdle)}}
}

// notes report how the part went.
func (f *resourceFanout) notes() []string {
	out := []string{fmt.Sprintf("Watch set: %d objects created in %.1f s (until mapper-apiserver's cache held them); opening the %d view watches "+
		"took %.1f s until mapper-apiserver counted them all.", f.setObjects, f.setSeconds, f.watches, f.openSeconds)}
	if rss, goMem, _ := f.viewIdle.perWatch(f.watches); goMem > rss {
		out = append(out, fmt.Sprintf("mapper-apiserver's RSS grew by less per idle watch (%.1f KiB) than its Go heap and stacks (%.1f KiB): "+
			"the watches reused memory the process held before (freed, not yet returned to the operating system), so the RSS figure "+
			"understates their cost.", rss/1024, goMem/1024))
	}
	if stacks, g := f.viewIdle.stacksPerWatch(f.watches), f.viewIdle.after.goroutines-f.viewIdle.before.goroutines; g > 0 {
		out = append(out, fmt.Sprintf("mapper-apiserver's goroutine stacks grew by %.1f KiB per idle view watch, %.1f KiB per new goroutine "+
			"(kube-apiserver: %.1f KiB per watch). k8s.io/apiserver serves each watch in the goroutine of its HTTP/2 stream's handler, "+
			"which stays blocked below the whole filter chain (authentication, audit, priority and fairness, authorization) for the "+
			"watch's life; the heap profile below shows the rest, most of it the HTTP/2 server's and the filters' per-request state.",
			stacks/1024, stacks*float64(f.watches)/g/1024, f.kubeIdle.stacksPerWatch(f.watches)/1024))
	}
	return out
}
