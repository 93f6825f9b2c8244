package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// Names of scenario 11.
const (
	// stormNamespace holds scenario 11's Deployments (none of the data set's objects).
	stormNamespace = "status-storm"
	// stormSentinel is the Deployment, assigned to every storm location, whose label change
	// after a storm marks the end of each watcher's events (a watch delivers in resourceVersion
	// order).
	stormSentinel = "storm-sentinel"
	// stormRoundLabel is the sentinel's label that changes after each storm.
	stormRoundLabel = "bench.kcp.io/storm-round"
	// stormWriteAttempts bounds how often a location writer repeats a status write answered 409
	// Conflict (as client-go's retry.RetryOnConflict would); each repeat is counted.
	stormWriteAttempts = 20
	// stormDrainTimeout bounds the wait for the sentinel's event at every watcher.
	stormDrainTimeout = 60 * time.Second
)

// scenarioStatusStorm is scenario 11: cfg.StormLocations locations write
// the status of the same cfg.StormObjects Deployments through their views, all locations at
// once, while one watch per location watches its view. Measured: the watch events the status
// writes cause across the locations' watches per status write (each location's status record,
// status.kcp.io/<location>, is visible in its own view only, so ideally 1: the writer's own
// view), the status writes per second, and the same storm written straight to kube-apiserver's
// /status with one label-selector watch per location as the baseline (there every write is an
// event for every location).
func (e *env) scenarioStatusStorm(ctx context.Context) *Scenario {
	s := &Scenario{ID: 11, Title: "Status write storm", Ran: true}
	start := time.Now()
	if e.mapper == nil {
		// A partial run (--scenarios=11) has no data set and no mapper-apiserver yet.
		framework.BuildBinary(e.tb, "./cmd/mapper-apiserver")
		e.mapper = framework.StartMapperAPIServer(e.tb, e.source, mapperArgs...)
		e.setupMapperClients()
	}
	locs := locationNames(e.cfg.StormLocations)
	names := make([]string, e.cfg.StormObjects)
	for i := range names {
		names[i] = fmt.Sprintf("storm-%04d", i)
	}
	e.logf("scenario 11: %d locations write the status of the same %d Deployments", len(locs), len(names))
	framework.EnsureNamespace(e.tb, ctx, e.source, stormNamespace)
	for _, name := range append([]string{stormSentinel}, names...) {
		if _, err := e.kube.AppsV1().Deployments(stormNamespace).Create(ctx, stormDeployment(name, locs), metav1.CreateOptions{}); err != nil {
			e.tb.Fatalf("scenario 11: creating Deployment %s: %v", name, err)
		}
	}
	if err := e.waitViewsList(ctx, locs, len(names)+1); err != nil {
		s.Ran, s.Reason = false, err.Error()
		return s
	}
	genBefore := e.stormGeneration(ctx, names[0])
	view := e.runStorm(ctx, true, locs, names)
	genAfter := e.stormGeneration(ctx, names[0])
	viewGens := e.viewGenerationCheck(ctx, locs, names[0], genBefore)
	kube := e.runStorm(ctx, false, locs, names)

	l := float64(len(locs))
	s.What = fmt.Sprintf("%d Deployments in namespace %s, each assigned to the same %d locations (`%s`) with `%s: %s`. "+
		"Each location opens one watch of the namespace's Deployments on its view (from a LIST's resourceVersion, its own "+
		"connection), then every location writes the status of every Deployment once through its view's `/status` "+
		"(a JSON merge patch, its own connection; a 409 is repeated, up to %d attempts), all %d locations at once, each "+
		"walking the Deployments in the same order. A status write of a location is kept in its record `%s<location>`, "+
		"which only that location's view shows, so each write should be an event in the writer's own view only. After "+
		"the writes a label change of a sentinel Deployment, visible to every location, ends each watcher's events; "+
		"the events of each write (matched by resourceVersion) are counted across all watchers. Baseline: the same "+
		"storm as %d×%d merge patches straight to kube-apiserver's `/status`, with one label-selector watch per location "+
		"on kube-apiserver.",
		len(names), stormNamespace, len(locs), contract.AssignedLocationsAnnotation, contract.StatusPolicyAnnotation, contract.StatusPolicyReflect,
		stormWriteAttempts, len(locs), contract.StatusRecordAnnotationPrefix, len(locs), len(names))
	s.Comparisons = []Comparison{
		{Metric: fmt.Sprintf("watch events per status write, all %d watchers", len(locs)), Unit: "events", Ours: view.eventsPerWrite(),
			Alternative: "kube-apiserver label-selector watches", AltValue: kube.eventsPerWrite(), LowerIsBetter: true},
		{Metric: "watch events per status write and watcher", Unit: "events", Ours: view.eventsPerWrite() / l,
			Alternative: "kube-apiserver label-selector watches", AltValue: kube.eventsPerWrite() / l, LowerIsBetter: true},
		{Metric: "status writes per second", Unit: "writes/s", Ours: view.writesPerSecond(),
			Alternative: "kube-apiserver /status", AltValue: kube.writesPerSecond(), LowerIsBetter: false},
		{Metric: "status write latency p50 (with repeats after 409)", Unit: "ms", Ours: view.latency.P50,
			Alternative: "kube-apiserver /status", AltValue: kube.latency.P50, LowerIsBetter: true},
		{Metric: "status write latency p99 (with repeats after 409)", Unit: "ms", Ours: view.latency.P99,
			Alternative: "kube-apiserver /status", AltValue: kube.latency.P99, LowerIsBetter: true},
		{Metric: "409 Conflicts repeated per status write", Unit: "repeats", Ours: float64(view.conflicts) / float64(max(len(view.writes), 1)),
			Alternative: "kube-apiserver /status", AltValue: float64(kube.conflicts) / float64(max(len(kube.writes), 1)), LowerIsBetter: true},
		{Metric: "mapper-apiserver CPU per status write", Unit: "ms", Ours: view.cpuPerWrite("mapper-apiserver"), AltValue: math.NaN(), LowerIsBetter: true},
		{Metric: "source kube-apiserver CPU per status write", Unit: "ms", Ours: view.cpuPerWrite("kube-apiserver"),
			Alternative: "kube-apiserver, writes straight to it", AltValue: kube.cpuPerWrite("kube-apiserver"), LowerIsBetter: true},
	}
	s.Targets = []Target{
		atMost(fmt.Sprintf("watch events per status write ≤ 2 across the %d locations' watches (1: the writer's own view; one per location would be %d)", len(locs), len(locs)),
			view.eventsPerWrite(), 2, "%.2f events"),
	}
	s.Checks = []Check{view.writeCheck(), view.ownCheck(), viewGens, kube.writeCheck()}
	s.Tables = []Table{{Title: "Storms:", Header: stormHeader, Rows: [][]string{view.row(), kube.row()}}}
	s.Notes = append(s.Notes, fmt.Sprintf("Through the views each status write is two requests of mapper-apiserver to the source (a GET of the current object, then the update "+
		"of the record), and mapper-apiserver's client to the source is limited to --source-qps (default 200 per second): at most 100 status writes per second "+
		"whatever the writers' concurrency, consistent with the %.1f writes/s and the p50 latency measured here with 20 writers.", view.writesPerSecond()))
	s.Notes = append(s.Notes, view.notes()...)
	s.Notes = append(s.Notes, kube.notes()...)
	switch {
	case genBefore == 0 || genAfter == 0:
	case genAfter > genBefore:
		s.Notes = append(s.Notes, fmt.Sprintf("metadata.generation of %s/%s on the source went from %d to %d over its %d status writes through the views: "+
			"a location's record is an annotation, written through the main resource, and kube-apiserver bumps a Deployment's generation on "+
			"every annotation change. A view shows the generation of its last change outside .status (docs/views.md), so no view shows these bumps (checked above).",
			stormNamespace, names[0], genBefore, genAfter, len(locs)))
	default:
		s.Notes = append(s.Notes, fmt.Sprintf("metadata.generation of %s/%s on the source stayed %d over its %d status writes through the views.",
			stormNamespace, names[0], genBefore, len(locs)))
	}
	s.Seconds = time.Since(start).Seconds()
	e.logf("scenario 11: %.2f events per status write through the views (kube-apiserver: %.2f), %.0f vs %.0f writes/s",
		view.eventsPerWrite(), kube.eventsPerWrite(), view.writesPerSecond(), kube.writesPerSecond())
	return s
}

// stormDeployment is scenario 11's Deployment name, assigned to locs (with their location labels,
// for kube-apiserver's label selectors) and opted in to status write-back.
func stormDeployment(name string, locs []string) *appsv1.Deployment {
	sel := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: stormNamespace,
			Labels:    labelsFor(locs, name),
			Annotations: map[string]string{
				contract.AssignedLocationsAnnotation: assignment(locs),
				contract.StatusPolicyAnnotation:      contract.StatusPolicyReflect,
			},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/storm/" + name + ":1.0"}}},
			},
		},
	}
}

// stormListURL is the URL of the storm namespace's Deployments on location's view or, with the
// location's label selector, on kube-apiserver; query is appended.
func (e *env) stormListURL(view bool, loc, query string) string {
	const path = "/apis/apps/v1/namespaces/" + stormNamespace + "/deployments"
	if view {
		if query == "" {
			return e.viewURL(loc) + path
		}
		return e.viewURL(loc) + path + "?" + query
	}
	q := "labelSelector=" + url.QueryEscape(LocationLabel(loc))
	if query != "" {
		q += "&" + query
	}
	return e.source.URL + path + "?" + q
}

// stormStatusURL is the URL of the /status of Deployment name in location's view or on
// kube-apiserver.
func (e *env) stormStatusURL(view bool, loc, name string) string {
	path := "/apis/apps/v1/namespaces/" + stormNamespace + "/deployments/" + name + "/status"
	if view {
		return e.viewURL(loc) + path
	}
	return e.source.URL + path
}

// stormList lists the storm namespace's Deployments of loc (view or kube-apiserver) and returns
// the number of items and the list's resourceVersion.
func (e *env) stormList(ctx context.Context, view bool, loc string) (int, uint64, error) {
	c := e.kaHTTP
	if view {
		c = e.maHTTP
	}
	res, err := timedGet(ctx, c, e.stormListURL(view, loc, ""), true)
	if err != nil {
		return 0, 0, err
	}
	var l struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(res.Body, &l); err != nil {
		return 0, 0, err
	}
	rv, err := strconv.ParseUint(l.Metadata.ResourceVersion, 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("list resourceVersion %q: %v", l.Metadata.ResourceVersion, err)
	}
	return len(l.Items), rv, nil
}

// waitViewsList waits (at most a minute) until every location's view lists want Deployments in
// the storm namespace: mapper-apiserver has ingested them.
func (e *env) waitViewsList(ctx context.Context, locs []string, want int) error {
	deadline := time.Now().Add(time.Minute)
	for _, loc := range locs {
		for {
			n, _, err := e.stormList(ctx, true, loc)
			if err == nil && n == want {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the view of %s listed %d of the %d Deployments of %s within a minute (last error: %v)", loc, n, want, stormNamespace, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// viewGenerationCheck checks, after the storm through the views, that every location's view
// of the storm Deployment name shows metadata.generation want (its generation before the
// storm): the records of the storm bump the source's generation, and a view's generation moves
// only with what the view shows outside .status (docs/views.md), a location's own status
// included.
func (e *env) viewGenerationCheck(ctx context.Context, locs []string, name string, want int64) Check {
	c := Check{Name: fmt.Sprintf("after the storm every location's view shows %s/%s at the generation it had before (%d): status records move no view's generation", stormNamespace, name, want)}
	for _, loc := range locs {
		c.Compared++
		res, err := timedGet(ctx, e.maHTTP, e.viewURL(loc)+"/apis/apps/v1/namespaces/"+stormNamespace+"/deployments/"+name, true)
		var obj struct {
			Metadata struct {
				Generation int64 `json:"generation"`
			} `json:"metadata"`
		}
		if err == nil {
			err = json.Unmarshal(res.Body, &obj)
		}
		if err != nil || obj.Metadata.Generation != want {
			c.Failures++
			if c.Detail == "" {
				c.Detail = fmt.Sprintf("%s's view: generation %d, err %v", loc, obj.Metadata.Generation, err)
			}
		}
	}
	return c
}

// stormGeneration returns metadata.generation of the storm Deployment name on the source (0
// when it cannot be read).
func (e *env) stormGeneration(ctx context.Context, name string) int64 {
	d, err := e.kube.AppsV1().Deployments(stormNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		e.logf("scenario 11: reading %s: %v", name, err)
		return 0
	}
	return d.Generation
}

// statusWrite is one acknowledged status write of a storm.
type statusWrite struct {
	loc     string
	name    string
	rv      uint64
	latency time.Duration
}

// storm is the outcome of one status write storm (through the views or straight to
// kube-apiserver).
type storm struct {
	name      string
	view      bool
	watchers  int
	planned   int
	writes    []statusWrite
	failures  int
	firstErr  string
	conflicts int
	// seconds is the wall time of the writes (all writers done).
	seconds float64
	latency stats
	// cpu is each process's CPU over the writes and the drain.
	cpu map[string]float64
	// events counts the events of status writes (matched by resourceVersion) all watchers
	// received; own those a writer's own watch received.
	events, own int
	// perWrite summarises, over the writes, how many watchers received each write's event.
	perWrite stats
	// other counts events of neither a status write nor the sentinel.
	other int
	// drained says whether every watcher received the sentinel's event in time.
	drained   bool
	bookmarks int64
	errors    []string
}

// runStorm opens one watch per location (on its view, or with its label selector on
// kube-apiserver), lets every location write the status of every Deployment of names once, all
// locations at once, then changes the sentinel and waits for its event at every watcher, and
// counts the events.
func (e *env) runStorm(ctx context.Context, view bool, locs, names []string) *storm {
	st := &storm{name: "through the views", view: view, watchers: len(locs), planned: len(locs) * len(names)}
	cfg := e.source.AdminConfig()
	if view {
		cfg = e.mapperConfig()
	} else {
		st.name = "straight to kube-apiserver"
	}
	ws := &watchSet{perKey: map[string]int{}}
	defer ws.stop()
	for _, loc := range locs {
		_, rv, err := e.stormList(ctx, view, loc)
		if err != nil {
			e.tb.Fatalf("scenario 11: listing %s's Deployments: %v", loc, err)
		}
		c, tr, err := dedicatedClient(cfg)
		if err != nil {
			e.tb.Fatal(err)
		}
		w, err := openWatch(ctx, loc, c, tr, e.stormListURL(view, loc, fmt.Sprintf("watch=true&allowWatchBookmarks=true&timeoutSeconds=3600&resourceVersion=%d", rv)))
		if err != nil {
			e.tb.Fatalf("scenario 11: watching %s's Deployments: %v", loc, err)
		}
		ws.streams = append(ws.streams, w)
		ws.perKey[watchKey("deployments.apps", loc)]++
	}

	cpu0 := e.cpu()
	t0 := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for k, loc := range locs {
		c, tr, err := dedicatedClient(cfg)
		if err != nil {
			e.tb.Fatal(err)
		}
		// Each location writes its own figures, so that consecutive writes of the same object by
		// different locations always change it (also straight on kube-apiserver's .status).
		body := []byte(fmt.Sprintf(`{"status":{"observedGeneration":1,"replicas":%d,"updatedReplicas":%d,"readyReplicas":%d,"availableReplicas":%d}}`, k+1, k+1, k+1, k+1))
		wg.Add(1)
		go func(loc string) {
			defer wg.Done()
			defer tr.CloseIdleConnections()
			for _, name := range names {
				w, conflicts, err := writeStatus(ctx, c, e.stormStatusURL(view, loc, name), body)
				w.loc, w.name = loc, name
				mu.Lock()
				st.conflicts += conflicts
				if err != nil {
					st.failures++
					if st.firstErr == "" {
						st.firstErr = fmt.Sprintf("%s writing %s: %v", loc, name, err)
					}
				} else {
					st.writes = append(st.writes, w)
				}
				mu.Unlock()
			}
		}(loc)
	}
	wg.Wait()
	st.seconds = time.Since(t0).Seconds()

	// The sentinel's change comes after every write; once a watcher has it (or a bookmark past
	// it), it has every event of the writes it will ever get.
	round := "kube-apiserver"
	if view {
		round = "views"
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, stormRoundLabel, round)
	d, err := e.kube.AppsV1().Deployments(stormNamespace).Patch(ctx, stormSentinel, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		e.tb.Fatalf("scenario 11: changing the sentinel: %v", err)
	}
	sentinel, err := strconv.ParseUint(d.ResourceVersion, 10, 64)
	if err != nil {
		e.tb.Fatal(err)
	}
	st.drained = true
	deadline := time.After(stormDrainTimeout)
	for _, w := range ws.streams {
		select {
		case <-w.waitFor(sentinel):
		case <-deadline:
			st.drained = false
		}
		if !st.drained {
			break
		}
	}
	st.cpu = cpuDelta(cpu0, e.cpu())

	byRV := make(map[uint64]*statusWrite, len(st.writes))
	var lat []float64
	for i := range st.writes {
		byRV[st.writes[i].rv] = &st.writes[i]
		lat = append(lat, ms(st.writes[i].latency))
	}
	st.latency = summarize(lat)
	got := make(map[uint64]int, len(st.writes))
	for _, w := range ws.streams {
		for _, r := range w.received() {
			wr, ok := byRV[r.rv]
			switch {
			case ok:
				st.events++
				got[r.rv]++
				if wr.loc == w.name {
					st.own++
				}
			case r.rv != sentinel:
				st.other++
			}
		}
		st.bookmarks += w.bookmarks.Load()
		if err := w.error(); err != nil {
			st.errors = append(st.errors, fmt.Sprintf("%s: %v", w.name, err))
		}
	}
	var per []float64
	for _, w := range st.writes {
		per = append(per, float64(got[w.rv]))
	}
	st.perWrite = summarize(per)
	e.logf("  %s: %d/%d status writes in %.1fs (%d 409s repeated), %d events (%.2f per write, %d in the writer's own view), drained %t",
		st.name, len(st.writes), st.planned, st.seconds, st.conflicts, st.events, st.eventsPerWrite(), st.own, st.drained)
	return st
}

// writeStatus sends the merge patch body to the /status URL u with client c, repeating it on
// 409 Conflict (up to stormWriteAttempts attempts, 10 ms apart). It returns the written
// object's resourceVersion and the time from the first request to the last answer, and how
// many 409s it repeated.
func writeStatus(ctx context.Context, c *http.Client, u string, body []byte) (statusWrite, int, error) {
	w := statusWrite{}
	start := time.Now()
	conflicts := 0
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPatch, u, bytes.NewReader(body))
		if err != nil {
			return w, conflicts, err
		}
		req.Header.Set("Content-Type", string(types.MergePatchType))
		req.Header.Set("Accept", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return w, conflicts, err
		}
		answer, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return w, conflicts, err
		}
		if resp.StatusCode == http.StatusConflict && attempt < stormWriteAttempts {
			conflicts++
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if resp.StatusCode != http.StatusOK {
			return w, conflicts, fmt.Errorf("PATCH %s: %s: %.300s", u, resp.Status, answer)
		}
		w.latency = time.Since(start)
		var obj struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(answer, &obj); err != nil {
			return w, conflicts, err
		}
		if w.rv, err = strconv.ParseUint(obj.Metadata.ResourceVersion, 10, 64); err != nil {
			return w, conflicts, fmt.Errorf("answer's resourceVersion %q: %v", obj.Metadata.ResourceVersion, err)
		}
		return w, conflicts, nil
	}
}

// eventsPerWrite is the number of watch events of status writes received by all watchers per
// acknowledged status write.
func (st *storm) eventsPerWrite() float64 {
	return float64(st.events) / float64(max(len(st.writes), 1))
}

// writesPerSecond is the acknowledged status writes per second of wall time.
func (st *storm) writesPerSecond() float64 {
	return float64(len(st.writes)) / math.Max(st.seconds, 1e-9)
}

// cpuPerWrite is proc's CPU per acknowledged status write, in ms.
func (st *storm) cpuPerWrite(proc string) float64 {
	return st.cpu[proc] / float64(max(len(st.writes), 1)) * 1000
}

// writeCheck is the check that every planned status write succeeded.
func (st *storm) writeCheck() Check {
	c := Check{Name: fmt.Sprintf("every status write of the storm (%s) succeeded", st.name), Compared: st.planned, Failures: st.failures}
	if st.failures > 0 {
		c.Detail = st.firstErr
	}
	return c
}

// ownCheck is the check that every location's watch received the event of each of its own
// status writes.
func (st *storm) ownCheck() Check {
	c := Check{Name: fmt.Sprintf("every location's watch received the event of each of its own status writes (%s)", st.name), Compared: len(st.writes), Failures: len(st.writes) - st.own}
	if c.Failures != 0 {
		c.Detail = fmt.Sprintf("%d of %d own events received; every watcher had the sentinel's event: %t", st.own, len(st.writes), st.drained)
	}
	return c
}

// stormHeader is the header of the detail table of scenario 11 (storm.row).
var stormHeader = []string{"storm", "watchers", "status writes", "409s repeated", "writes/s", "write p50 ms", "write p99 ms",
	"events of the writes", "events per write", "watchers per write p50", "watchers per write max", "other events",
	"CPU s mapper-apiserver", "CPU s kube-apiserver", "CPU s etcd", "CPU s bench client", "bookmarks"}

// row renders the storm for the detail table.
func (st *storm) row() []string {
	return []string{st.name, fmt.Sprint(st.watchers), fmt.Sprintf("%d/%d", len(st.writes), st.planned), fmt.Sprint(st.conflicts),
		fmtNum(st.writesPerSecond()), fmtNum(st.latency.P50), fmtNum(st.latency.P99),
		fmt.Sprint(st.events), fmtNum(st.eventsPerWrite()), fmtNum(st.perWrite.P50), fmtNum(st.perWrite.Max), fmt.Sprint(st.other),
		fmtNum(st.cpu["mapper-apiserver"]), fmtNum(st.cpu["kube-apiserver"]), fmtNum(st.cpu["etcd"]), fmtNum(st.cpu["bench"]),
		fmt.Sprint(st.bookmarks)}
}

// notes reports a storm's failures, watch errors, events of no write and a missing sentinel.
func (st *storm) notes() []string {
	var out []string
	if st.failures > 0 {
		out = append(out, fmt.Sprintf("**%s: %d of %d status writes failed**, e.g. %s", st.name, st.failures, st.planned, st.firstErr))
	}
	if len(st.errors) > 0 {
		out = append(out, fmt.Sprintf("**%s: %d watches ended with an error**, e.g. %s", st.name, len(st.errors), st.errors[0]))
	}
	if !st.drained {
		out = append(out, fmt.Sprintf("**%s: not every watcher received the sentinel's event within %s**; events still on their way are not counted.", st.name, stormDrainTimeout))
	}
	if st.other > 0 {
		out = append(out, fmt.Sprintf("%s: %d events matched no acknowledged status write (not counted).", st.name, st.other))
	}
	return out
}
