package bench

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// scenarioResume is scenario 7: watchers disconnected for cfg.ResumeGap while writes go on
// catch up by resourceVersion; compared with relisting their location.
func (e *env) scenarioResume(ctx context.Context) *Scenario {
	s := &Scenario{ID: 7, Title: "Resume after a disconnect", Ran: true}
	start := time.Now()
	locs := e.ds.locations
	e.logf("scenario 7: %d view watchers, disconnect for %s", len(locs), e.cfg.ResumeGap)
	rv0 := e.currentRV(ctx, true)
	ws := e.openWatchers(ctx, true, locs, rv0)
	// A few seconds of writes while connected, so that the watchers have seen recent events.
	warm := e.runWrites(ctx, 2*time.Second, e.cfg.Seed+701, e.randomWrites(e.cfg.AssignmentWritePercent))
	warmWant := map[string]uint64{}
	for _, r := range warm.records {
		for _, l := range union(r.oldLocs, r.newLocs) {
			warmWant[l] = max(warmWant[l], r.rv)
		}
	}
	waitAll(ws, warmWant, 10*time.Second)
	last := make(map[string]uint64, len(locs))
	for _, w := range ws.streams {
		// A watcher resumes from the last resourceVersion it saw (event or bookmark), or from
		// where it started.
		last[w.name] = max(w.lastRV.Load(), rv0)
	}
	ws.stop()

	gap := e.runWrites(ctx, e.cfg.ResumeGap, e.cfg.Seed+702, e.randomWrites(e.cfg.AssignmentWritePercent))
	// What each location must receive on resume: the writes that touched it after its last RV.
	want := map[string]uint64{}
	count := map[string]int{}
	for _, r := range gap.records {
		for _, l := range union(r.oldLocs, r.newLocs) {
			if r.rv > last[l] {
				want[l] = max(want[l], r.rv)
				count[l]++
			}
		}
	}
	// Let the view's cache see the last gap write before anyone resumes.
	var gapMax uint64
	for _, r := range gap.records {
		gapMax = max(gapMax, r.rv)
	}
	for e.currentRV(ctx, true) < gapMax && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}

	e.logf("scenario 7: resuming %d watches (%d writes during the gap)", len(locs), len(gap.records))
	cfg := e.mapperConfig()
	type result struct {
		loc         string
		resumeBytes int64
		resumeTime  time.Duration
		events      int
		missing     int
		relistBytes int64
		relistTime  time.Duration
		err         error
	}
	results := make([]result, len(locs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, loc := range locs {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int, loc string) {
			defer wg.Done()
			defer func() { <-sem }()
			res := result{loc: loc}
			c, tr, err := dedicatedClient(cfg)
			if err != nil {
				res.err = err
				results[i] = res
				return
			}
			t0 := time.Now()
			w, err := openWatch(ctx, loc, c, tr, e.watchURL(true, loc, last[loc]))
			if err != nil {
				res.err = err
				results[i] = res
				return
			}
			if target, ok := want[loc]; ok {
				select {
				case <-w.waitFor(target):
				case <-time.After(30 * time.Second):
					res.missing = count[loc] - len(w.received())
				}
			}
			res.resumeTime = time.Since(t0)
			w.stop()
			res.resumeBytes = w.bytes.Load()
			res.events = len(w.received())
			if err := w.error(); err != nil {
				res.err = err
			}
			// The alternative: relist the location (what a client does after 410 Gone, or an
			// informer that restarts).
			lr, err := timedGet(ctx, e.maHTTP, e.viewURL(loc)+"/api/v1/configmaps?resourceVersion=0", false)
			if err != nil {
				res.err = err
			}
			res.relistBytes, res.relistTime = lr.Bytes, lr.Latency
			results[i] = res
		}(i, loc)
	}
	wg.Wait()

	var resumeBytes, relistBytes int64
	var resumeT, relistT, resumeTouched []float64
	events, missing, touched := 0, 0, 0
	var errs []string
	for _, r := range results {
		if r.err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", r.loc, r.err))
			continue
		}
		resumeBytes += r.resumeBytes
		relistBytes += r.relistBytes
		resumeT = append(resumeT, ms(r.resumeTime))
		relistT = append(relistT, ms(r.relistTime))
		events += r.events
		missing += max(r.missing, 0)
		if _, ok := want[r.loc]; ok {
			touched++
			resumeTouched = append(resumeTouched, ms(r.resumeTime))
		}
	}
	rt, lt, rtt := summarize(resumeT), summarize(relistT), summarize(resumeTouched)
	s.What = fmt.Sprintf("%d view watchers (one per location, ConfigMaps) were connected, then disconnected for %s while the source took "+
		"%d writes (%.0f/s, %d%% re-assignments). Each then resumed its watch from the last resourceVersion it had seen, and read "+
		"until it had the newest event it was owed; the alternative is a relist of its location (resourceVersion=0, the "+
		"cheapest LIST). Bytes are response bodies; time is from the request to the last owed event (or to the response "+
		"headers when nothing was owed). %d of %d locations were touched by a gap write.",
		len(locs), e.cfg.ResumeGap, len(gap.records), e.cfg.WriteRate, e.cfg.AssignmentWritePercent, touched, len(locs))
	ratio := float64(resumeBytes) / float64(max(relistBytes, 1))
	s.Comparisons = []Comparison{
		{Metric: "bytes to catch up, all locations", Unit: "KiB", Ours: float64(resumeBytes) / 1024, Alternative: "relist", AltValue: float64(relistBytes) / 1024, LowerIsBetter: true},
		{Metric: "bytes per watcher (mean)", Unit: "KiB", Ours: float64(resumeBytes) / float64(max(len(resumeT), 1)) / 1024, Alternative: "relist", AltValue: float64(relistBytes) / float64(max(len(relistT), 1)) / 1024, LowerIsBetter: true},
		{Metric: "time to catch up p50", Unit: "ms", Ours: rt.P50, Alternative: "relist", AltValue: lt.P50, LowerIsBetter: true},
		{Metric: "time to catch up p99", Unit: "ms", Ours: rt.P99, Alternative: "relist", AltValue: lt.P99, LowerIsBetter: true},
		{Metric: "time to catch up p50, locations owed events", Unit: "ms", Ours: rtt.P50, Alternative: "relist (all locations)", AltValue: lt.P50, LowerIsBetter: true},
	}
	s.Targets = []Target{atMost(fmt.Sprintf("resume after %s away ≤ 5%% of the bytes of a relist", e.cfg.ResumeGap), ratio*100, 5, "%.2f%%")}
	s.Notes = append(s.Notes, fmt.Sprintf("Events replayed on resume: %d in total (%.2f per watcher).", events, float64(events)/float64(max(len(locs), 1))))
	if missing > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("**%d owed events did not arrive within 30 s.**", missing))
	}
	if len(errs) > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("**%d resumes failed**, e.g. %s", len(errs), errs[0]))
	}
	s.Seconds = time.Since(start).Seconds()
	return s
}

// waitAll waits until every watcher saw the resourceVersion wanted for its location, or
// timeout passed.
func waitAll(ws *watchSet, want map[string]uint64, timeout time.Duration) {
	deadline := time.After(timeout)
	for _, w := range ws.streams {
		rv, ok := want[w.name]
		if !ok {
			continue
		}
		select {
		case <-w.waitFor(rv):
		case <-deadline:
			return
		}
	}
}
