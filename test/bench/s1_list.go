package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"net/url"
	"slices"
	"sort"
	"time"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// listVariant is one way of listing one location's ConfigMaps.
type listVariant struct {
	name string
	url  func(loc string) string
	// view tells which client to use.
	view bool

	lat   []float64
	bytes []float64
	items map[string][]string // first sample's items per location (sorted namespace/name)
}

// listKeys returns the namespace/name of a JSON list's items, sorted (never nil).
func listKeys(body []byte) ([]string, error) {
	var l struct {
		Items []struct {
			Metadata struct {
				Namespace string `json:"namespace"`
				Name      string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(l.Items))
	for _, it := range l.Items {
		keys = append(keys, it.Metadata.Namespace+"/"+it.Metadata.Name)
	}
	sort.Strings(keys)
	return keys, nil
}

// agreement compares lists of objects by location and builds the Check of scenario 1.
type agreement struct {
	check Check
}

// compare records one comparison of got (what a list returned) with want.
func (a *agreement) compare(what, loc string, got, want []string) {
	a.check.Compared++
	if slices.Equal(got, want) {
		return
	}
	a.check.Failures++
	if a.check.Failures <= 3 {
		missing, extra := diffKeys(want, got)
		a.check.Detail += fmt.Sprintf("%s, location %s: %d objects, want %d (missing %v, extra %v). ", what, loc, len(got), len(want), head(missing, 3), head(extra, 3))
	}
}

// diffKeys returns the keys of want missing in got and the keys of got not in want.
func diffKeys(want, got []string) (missing, extra []string) {
	w, g := map[string]bool{}, map[string]bool{}
	for _, k := range want {
		w[k] = true
	}
	for _, k := range got {
		g[k] = true
		if !w[k] {
			extra = append(extra, k)
		}
	}
	for _, k := range want {
		if !g[k] {
			missing = append(missing, k)
		}
	}
	return missing, extra
}

func head(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// scenarioList is scenario 1: per-location LIST on the view vs the label-selector LIST on
// kube-apiserver vs a naive mapper that lists everything and filters.
func (e *env) scenarioList(ctx context.Context) *Scenario {
	s := &Scenario{ID: 1, Title: "Per-location LIST", Ran: true}
	start := time.Now()
	r := rand.New(rand.NewSource(e.cfg.Seed + 101))
	locs := make([]string, e.cfg.ListSamples)
	perm := r.Perm(len(e.ds.locations))
	for i := range locs {
		locs[i] = e.ds.locations[perm[i%len(perm)]]
	}
	sel := func(loc string) string { return url.QueryEscape(LocationLabel(loc)) }
	viewList := func(l string) string { return e.viewURL(l) + "/api/v1/configmaps?resourceVersion=0" }
	kubeList := func(l string) string {
		return e.source.URL + "/api/v1/configmaps?resourceVersion=0&labelSelector=" + sel(l)
	}
	cached := []*listVariant{
		{name: "view, resourceVersion=0, first LIST", view: true, url: viewList},
		{name: "kube-apiserver label selector, resourceVersion=0, first LIST", url: kubeList},
	}
	repeated := []*listVariant{
		{name: "view, resourceVersion=0, repeated LIST", view: true, url: viewList},
		{name: "kube-apiserver label selector, resourceVersion=0, repeated LIST", url: kubeList},
	}
	consistent := []*listVariant{
		{name: "view, resourceVersion=\"\" (consistent)", view: true, url: func(l string) string { return e.viewURL(l) + "/api/v1/configmaps" }},
		{name: "kube-apiserver label selector, resourceVersion=\"\" (consistent)", url: func(l string) string {
			return e.source.URL + "/api/v1/configmaps?labelSelector=" + sel(l)
		}},
	}
	// alone is a diagnostic, not a target: the view's LISTs without kube-apiserver's in between,
	// whose CPU (about 20 times the view's per LIST) shares the machine's 2 cores with the view's
	// next LIST.
	alone := []*listVariant{{name: "view, resourceVersion=0, alone (no kube-apiserver LIST in between)", view: true, url: viewList}}
	run := func(vs []*listVariant, locs []string, record bool) {
		for i, loc := range locs {
			// Alternate the order so that neither side always runs right after the other.
			for j := range vs {
				k := j
				if i%2 == 1 {
					k = len(vs) - 1 - j
				}
				v := vs[k]
				c := e.kaHTTP
				if v.view {
					c = e.maHTTP
				}
				keep := record && v.items[loc] == nil
				res, err := timedGet(ctx, c, v.url(loc), keep)
				if err != nil {
					e.tb.Fatalf("scenario 1, %s: %v", v.name, err)
				}
				if !record {
					continue
				}
				v.lat = append(v.lat, ms(res.Latency))
				v.bytes = append(v.bytes, float64(res.Bytes))
				if keep {
					keys, err := listKeys(res.Body)
					if err != nil {
						e.tb.Fatalf("scenario 1, %s: %v", v.name, err)
					}
					v.items[loc] = keys
				}
			}
		}
	}
	all := append(append(append(append([]*listVariant{}, cached...), repeated...), consistent...), alone...)
	for _, v := range all {
		v.items = map[string][]string{}
	}

	// Warm up connections and authorization, with locations outside the sample where there
	// are enough, so that the sampled locations' first LISTs really are their first.
	warmLocs := make([]string, 0, 10)
	for i := 0; i < 10; i++ {
		warmLocs = append(warmLocs, e.ds.locations[perm[(len(locs)+i)%len(perm)]])
	}
	warm := time.Now()
	run(cached, warmLocs, false)
	perPair := time.Since(warm) / time.Duration(len(warmLocs))
	secs := int(math.Ceil((perPair * time.Duration(len(locs))).Seconds()))
	e.logf("scenario 1: %d locations, cached variants (profiling %ds)", len(locs), secs)
	waitMA := e.startCPUProfile(ctx, e.maTarget(), "s1-list-mapper-apiserver", "scenario 1, first LISTs with resourceVersion=0 (both servers, interleaved)", secs)
	waitKA := e.startCPUProfile(ctx, e.kaTarget(), "s1-list-kube-apiserver", "scenario 1, first LISTs with resourceVersion=0 (both servers, interleaved)", secs)
	cpu0 := e.cpu()
	run(cached, locs, true)
	cpu1 := e.cpu()
	e.logf("scenario 1: the same LISTs again")
	run(repeated, locs, true)
	e.logf("scenario 1: the view's LISTs alone")
	durations0, durationsOK0 := e.viewRequestDurations(ctx)
	run(alone, locs, true)
	durations1, durationsOK1 := e.viewRequestDurations(ctx)
	e.logf("scenario 1: consistent variants")
	unproven0 := e.maMetric(ctx, "mapper_apiserver_view_unproven_consistent_reads_total")
	run(consistent, locs, true)
	unproven1 := e.maMetric(ctx, "mapper_apiserver_view_unproven_consistent_reads_total")

	// Correctness: every variant lists exactly the objects the data set assigns to the
	// location (no writes happen before scenario 2), so the view, the label selector and (below)
	// the naive filter agree with each other and with the truth.
	agree := agreement{check: Check{Name: "the view, kube-apiserver's label-selector LIST and the naive list-all-and-filter list the same objects, the ones the data set assigns to the location"}}
	for _, loc := range sortedUnique(append([]string(nil), locs...)) {
		var want []string
		for _, i := range e.ds.locationObjects(loc, kindConfigMap) {
			o := e.ds.objects[i]
			want = append(want, o.namespace+"/"+o.name)
		}
		sort.Strings(want)
		if want == nil {
			want = []string{}
		}
		for _, v := range all {
			got, ok := v.items[loc]
			if !ok {
				got = []string{"(not listed)"}
			}
			agree.compare(v.name, loc, got, want)
		}
	}

	// The naive mapper: list every ConfigMap from kube-apiserver's watch cache, decode, filter.
	e.logf("scenario 1: naive list-all-and-filter, %d runs", e.cfg.NaiveListSamples)
	var naiveTotal, naiveTransfer, naiveBytes []float64
	for i := 0; i < e.cfg.NaiveListSamples; i++ {
		loc := locs[i%len(locs)]
		t0 := time.Now()
		res, err := timedGet(ctx, e.kaHTTP, e.source.URL+"/api/v1/configmaps?resourceVersion=0", true)
		if err != nil {
			e.tb.Fatalf("scenario 1, naive list: %v", err)
		}
		obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, res.Body)
		if err != nil {
			e.tb.Fatalf("scenario 1, naive list: %v", err)
		}
		mine := []string{}
		for _, it := range obj.(*unstructured.UnstructuredList).Items {
			ls, err := contract.ParseLocations(it.GetAnnotations()[contract.AssignedLocationsAnnotation])
			if err == nil && hasString(ls, loc) {
				mine = append(mine, it.GetNamespace()+"/"+it.GetName())
			}
		}
		sort.Strings(mine)
		naiveTotal = append(naiveTotal, ms(time.Since(t0)))
		naiveTransfer = append(naiveTransfer, ms(res.Latency))
		naiveBytes = append(naiveBytes, float64(res.Bytes))
		agree.compare("naive list-all-and-filter vs the view", loc, mine, cached[0].items[loc])
	}

	v0, k0, vc, kc := summarize(cached[0].lat), summarize(cached[1].lat), summarize(consistent[0].lat), summarize(consistent[1].lat)
	vr, kr := summarize(repeated[0].lat), summarize(repeated[1].lat)
	va := summarize(alone[0].lat)
	vb, kb := summarize(cached[0].bytes), summarize(cached[1].bytes)
	nt, ntr, nb := summarize(naiveTotal), summarize(naiveTransfer), summarize(naiveBytes)
	s.What = fmt.Sprintf("A full LIST of one location's ConfigMaps, sampled over %d locations (one sequential client, the two servers "+
		"alternating): the view's `/api/v1/configmaps` vs kube-apiserver's `/api/v1/configmaps?labelSelector=%s<location>`, "+
		"first with resourceVersion=0 (both answer from their caches as they are; what a client-go reflector's first LIST asks for), "+
		"then the same LISTs again (the view encodes an object's JSON on its first read after start-up and keeps it, so the first "+
		"LIST of a location pays for encoding and a repeated one does not), then with resourceVersion=\"\" (consistent read). Latency is until the last byte of the body. The naive mapper "+
		"lists every ConfigMap (resourceVersion=0, from kube-apiserver's watch cache), decodes it and keeps the location's "+
		"objects (%d runs).", len(locs), LocationLabelPrefix, len(naiveTotal))
	s.Comparisons = []Comparison{
		{Metric: "LIST p50, resourceVersion=0, first LIST", Unit: "ms", Ours: v0.P50, Alternative: "kube-apiserver label selector", AltValue: k0.P50, LowerIsBetter: true},
		{Metric: "LIST p99, resourceVersion=0, first LIST", Unit: "ms", Ours: v0.P99, Alternative: "kube-apiserver label selector", AltValue: k0.P99, LowerIsBetter: true},
		{Metric: "LIST p50, resourceVersion=0, repeated LIST", Unit: "ms", Ours: vr.P50, Alternative: "kube-apiserver label selector", AltValue: kr.P50, LowerIsBetter: true},
		{Metric: "LIST p99, resourceVersion=0, repeated LIST", Unit: "ms", Ours: vr.P99, Alternative: "kube-apiserver label selector", AltValue: kr.P99, LowerIsBetter: true},
		{Metric: "LIST p50, consistent", Unit: "ms", Ours: vc.P50, Alternative: "kube-apiserver label selector", AltValue: kc.P50, LowerIsBetter: true},
		{Metric: "LIST p99, consistent", Unit: "ms", Ours: vc.P99, Alternative: "kube-apiserver label selector", AltValue: kc.P99, LowerIsBetter: true},
		{Metric: "bytes per LIST (mean)", Unit: "KiB", Ours: vb.Mean / 1024, Alternative: "kube-apiserver label selector", AltValue: kb.Mean / 1024, LowerIsBetter: true},
		{Metric: "time to the location's objects (p50)", Unit: "ms", Ours: v0.P50, Alternative: "naive list-all + filter", AltValue: nt.P50, LowerIsBetter: true},
		{Metric: "bytes transferred", Unit: "KiB", Ours: vb.Mean / 1024, Alternative: "naive list-all + filter", AltValue: nb.Mean / 1024, LowerIsBetter: true},
	}
	s.Targets = []Target{
		atMost("per-location LIST p99 ≤ 5 ms (resourceVersion=0), first LIST", v0.P99, 5, "%.2f ms"),
		atLeast("≥ 20× faster than the label-selector LIST, p50, first LIST", k0.P50/v0.P50, 20, "%.1f×"),
		atLeast("≥ 20× faster than the label-selector LIST, p99, first LIST", k0.P99/v0.P99, 20, "%.1f×"),
		atMost("per-location LIST p99 ≤ 5 ms (resourceVersion=0), repeated LIST", vr.P99, 5, "%.2f ms"),
		atLeast("≥ 20× faster than the label-selector LIST, p50, repeated LIST", kr.P50/vr.P50, 20, "%.1f×"),
		atLeast("≥ 20× faster than the label-selector LIST, p99, repeated LIST", kr.P99/vr.P99, 20, "%.1f×"),
	}
	row := func(name string, l, b stats) []string {
		return []string{name, fmt.Sprint(l.N), fmtNum(l.P50), fmtNum(l.P90), fmtNum(l.P99), fmtNum(l.Max), fmtNum(b.Mean / 1024)}
	}
	s.Tables = append(s.Tables, Table{
		Title:  "Latency (ms) and size per variant:",
		Header: []string{"variant", "n", "p50", "p90", "p99", "max", "KiB (mean)"},
		Rows: [][]string{
			row(cached[0].name, v0, vb), row(cached[1].name, k0, kb),
			row(repeated[0].name, vr, summarize(repeated[0].bytes)), row(repeated[1].name, kr, summarize(repeated[1].bytes)),
			row(consistent[0].name, vc, summarize(consistent[0].bytes)), row(consistent[1].name, kc, summarize(consistent[1].bytes)),
			row(alone[0].name, va, summarize(alone[0].bytes)),
			row("naive: list all ConfigMaps, transfer only", ntr, nb), row("naive: list all, decode and filter", nt, nb),
		},
	})
	cpu := cpuDelta(cpu0, cpu1)
	n := float64(len(locs))
	s.Notes = append(s.Notes,
		fmt.Sprintf("Server CPU per LIST (first LISTs with resourceVersion=0, /proc): mapper-apiserver %.2f ms, kube-apiserver %.2f ms "+
			"(each server served %d LISTs in the window; the other's idle CPU is included). The CPU profiles below cover these first LISTs.", cpu["mapper-apiserver"]/n*1000, cpu["kube-apiserver"]/n*1000, len(locs)),
		aloneNote(va, vr, alone[0].lat, durations1, durations0, durationsOK0 && durationsOK1),
		fmt.Sprintf("Consistent LISTs of the view that could not prove freshness within the bounded wait (docs/views.md) and were "+
			"served at the cache's resourceVersion: %.0f of %d (mapper_apiserver_view_unproven_consistent_reads_total).", unproven1-unproven0, len(locs)),
	)
	s.Checks = append(s.Checks, agree.check)
	if !agree.check.Passed() {
		e.logf("scenario 1: %d of %d list comparisons disagree: %s", agree.check.Failures, agree.check.Compared, agree.check.Detail)
	}
	for _, w := range []func() *Profile{waitMA, waitKA} {
		if p := w(); p != nil {
			s.Profiles = append(s.Profiles, *p)
		}
	}
	s.Seconds = time.Since(start).Seconds()
	return s
}

// maMetric reads one (summed) metric of mapper-apiserver; NaN when it cannot be read.
func (e *env) maMetric(ctx context.Context, name string) float64 {
	m, err := scrapeMetrics(ctx, e.maHTTP, e.mapper.URL+"/metrics")
	if err != nil {
		e.logf("reading mapper-apiserver metrics: %v", err)
		return math.NaN()
	}
	v, ok := m[name]
	if !ok {
		return 0
	}
	return v
}

// aloneNote reports the diagnostic variant of scenario 1: the view's LISTs without kube-apiserver's
// in between (latencies alone, in ms), against the same LISTs between kube-apiserver's
// (between), and how many of them the server itself took more than 5 ms to serve (after minus
// before, when known).
func aloneNote(alone, between stats, latencies []float64, after, before requestDurations, known bool) string {
	note := fmt.Sprintf("The view's LISTs alone, without kube-apiserver's LIST in between (a diagnostic, no target): p50 %.2f ms, p99 %.2f ms, "+
		"against %.2f ms and %.2f ms for the same LISTs between kube-apiserver's (repeated LIST).", alone.P50, alone.P99, between.P50, between.P99)
	note += fmt.Sprintf(" Alone, p99 is %.2f ms %s: what kube-apiserver's LISTs in between cost the view, if anything (one run's "+
		"difference is within the spread between runs).", math.Abs(between.P99-alone.P99), map[bool]string{true: "lower", false: "higher"}[alone.P99 < between.P99])
	slow := 0
	for _, l := range latencies {
		if l > 5 {
			slow++
		}
	}
	if n, within, ok := after.since(before, 0.005); known && ok && n > 0 {
		note += fmt.Sprintf(" The client saw %d of these %d LISTs take more than 5 ms; mapper-apiserver itself (apiserver_request_duration_seconds "+
			"of locations/proxy, until its handler had handed the whole response to the HTTP/2 server) took more than 5 ms for %d of %d requests.",
			slow, len(latencies), n-within, n)
	}
	return note
}
