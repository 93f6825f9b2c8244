package bench

import (
	"context"
	"fmt"
	"time"
)

// scenarioEncodeOnce is scenario 3: CPU per event with 1 vs W watchers on the same location,
// on the view and, for comparison, on kube-apiserver with the location's label selector.
func (e *env) scenarioEncodeOnce(ctx context.Context) *Scenario {
	s := &Scenario{ID: 3, Title: "Encode once", Ran: true}
	start := time.Now()
	// The regular location with the most ConfigMaps; every write changes the data of one of them.
	loc, idxs := "", []int(nil)
	for _, l := range e.ds.locations {
		if x := e.ds.locationObjects(l, kindConfigMap); len(x) > len(idxs) {
			loc, idxs = l, x
		}
	}
	d := e.cfg.EncodeDuration
	w := e.cfg.EncodeWatchers
	repeat := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = loc
		}
		return out
	}
	seed := e.cfg.Seed + 303
	e.logf("scenario 3: location %s (%d ConfigMaps), 0, 1 and %d watchers", loc, len(idxs), w)
	base := e.runPhase(ctx, "baseline: writes only", nil, d, seed, cyclicWrites(idxs), nil)

	ws := e.openWatchers(ctx, true, repeat(1), 0)
	v1 := e.runPhase(ctx, "1 view watch", ws, d, seed, cyclicWrites(idxs), map[profileTarget]string{e.maTarget(): "s3-encode-1-mapper-apiserver"})
	ws.stop()
	ws = e.openWatchers(ctx, true, repeat(w), 0)
	vw := e.runPhase(ctx, fmt.Sprintf("%d view watches", w), ws, d, seed, cyclicWrites(idxs), map[profileTarget]string{e.maTarget(): fmt.Sprintf("s3-encode-%d-mapper-apiserver", w)})
	ws.stop()
	ws = e.openWatchers(ctx, false, repeat(1), 0)
	k1 := e.runPhase(ctx, "1 kube-apiserver watch", ws, d, seed, cyclicWrites(idxs), nil)
	ws.stop()
	ws = e.openWatchers(ctx, false, repeat(w), 0)
	kw := e.runPhase(ctx, fmt.Sprintf("%d kube-apiserver watches", w), ws, d, seed, cyclicWrites(idxs), map[profileTarget]string{e.kaTarget(): fmt.Sprintf("s3-encode-%d-kube-apiserver", w)})
	ws.stop()
	time.Sleep(time.Second)

	perEvent := func(p *phase, proc string, marginal bool) float64 {
		c := p.cpu[proc]
		if marginal {
			c -= base.cpu[proc] * p.seconds / base.seconds
		}
		return c / float64(max(len(p.writes.records), 1)) * 1000
	}
	perDelivery := func(p *phase, proc string) float64 {
		return p.cpu[proc] / float64(max(p.delivered, 1)) * 1000
	}
	o1, ow := perEvent(v1, "mapper-apiserver", false), perEvent(vw, "mapper-apiserver", false)
	k1m, kwm := perEvent(k1, "kube-apiserver", true), perEvent(kw, "kube-apiserver", true)
	s.What = fmt.Sprintf("Every write changes the data of one of the %d ConfigMaps of location %s (%.0f writes/s, %s per phase), "+
		"watched by 1 and then by %d watchers of that location (each on its own connection). CPU per source event is the "+
		"server's CPU over the phase divided by the writes. For mapper-apiserver it is its total CPU (ingest, encode, fan-out, "+
		"serving); for kube-apiserver the marginal CPU over a baseline phase with the same writes and no watchers.",
		len(idxs), loc, e.cfg.WriteRate, d, w)
	s.Comparisons = []Comparison{
		{Metric: "CPU per event, 1 watcher", Unit: "ms", Ours: o1, Alternative: "kube-apiserver (marginal), 1 watcher", AltValue: k1m, LowerIsBetter: true},
		{Metric: fmt.Sprintf("CPU per event, %d watchers", w), Unit: "ms", Ours: ow, Alternative: fmt.Sprintf("kube-apiserver (marginal), %d watchers", w), AltValue: kwm, LowerIsBetter: true},
		{Metric: fmt.Sprintf("growth %d ÷ 1 watchers", w), Unit: "×", Ours: ow / o1, Alternative: "kube-apiserver (marginal)", AltValue: kwm / k1m, LowerIsBetter: true},
		{Metric: fmt.Sprintf("CPU per delivered event, %d watchers", w), Unit: "ms", Ours: perDelivery(vw, "mapper-apiserver"), Alternative: "kube-apiserver (total)", AltValue: perDelivery(kw, "kube-apiserver"), LowerIsBetter: true},
		{Metric: fmt.Sprintf("delivery latency p99, %d watchers", w), Unit: "ms", Ours: vw.latency.P99, Alternative: "kube-apiserver", AltValue: kw.latency.P99, LowerIsBetter: true},
	}
	s.Targets = []Target{
		atMost(fmt.Sprintf("CPU per event with %d watchers on one location ≤ 1.5× that with 1", w), ow/o1, 1.5, "%.2f×"),
	}
	s.Tables = []Table{{Title: "Phases:", Header: phaseHeader, Rows: [][]string{phaseRow(base), phaseRow(v1), phaseRow(vw), phaseRow(k1), phaseRow(kw)}}}
	s.Notes = append(s.Notes, phaseNotes(base, v1, vw, k1, kw)...)
	s.Notes = append(s.Notes, fmt.Sprintf("Per delivered event (CPU ÷ events received by all watchers), mapper-apiserver: %.3f ms with 1 watcher, %.3f ms with %d.",
		perDelivery(v1, "mapper-apiserver"), perDelivery(vw, "mapper-apiserver"), w))
	if len(v1.profiles) > 0 && len(vw.profiles) > 0 {
		enc1, encW := categorySeconds(v1.profiles[0], "JSON encoding"), categorySeconds(vw.profiles[0], "JSON encoding")
		s.Notes = append(s.Notes, fmt.Sprintf("JSON encoding in mapper-apiserver's CPU profiles (see below): %.3f ms per event with 1 watcher, %.3f ms per event with %d watchers "+
			"(%.2f s and %.2f s of samples over %d and %d events); the rest of the growth is per-watcher delivery (HTTP/2 framing, TLS, write syscalls, goroutine hand-offs).",
			enc1/float64(max(len(v1.writes.records), 1))*1000, encW/float64(max(len(vw.writes.records), 1))*1000, w, enc1, encW, len(v1.writes.records), len(vw.writes.records)))
	}
	for _, p := range []*phase{v1, vw, kw} {
		for _, pr := range p.profiles {
			s.Profiles = append(s.Profiles, *pr)
		}
	}
	s.Seconds = time.Since(start).Seconds()
	return s
}
