package bench

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	controllerapp "github.com/cluster-mapper/cluster-mapper/pkg/controller/app"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper/heartbeat"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// Location heartbeat model (docs/locations.md): every mapper renews its Lease every 10 s and writes its
// SyncTarget status at most once a minute (heartbeat.DefaultRenewInterval and
// DefaultStatusInterval).
const (
	locationRenewInterval  = heartbeat.DefaultRenewInterval
	locationStatusInterval = heartbeat.DefaultStatusInterval
)

// apiserverRequests is kube-apiserver's request counter, labelled by verb and resource.
const apiserverRequests = "apiserver_request_total"

// scenarioLocations is scenario 8: L SyncTargets whose Leases are renewed every 10 s and whose
// status is written once a minute, by L heartbeats of pkg/mapper/heartbeat (what each pull
// mapper runs) in this process; the real mapper-controller watches them. Measured over
// cfg.LocationsWindow: mapper-controller's CPU and RSS, the source's request rates and CPU.
// Checked: no location but the stopped one leaves Ready=True, and the stopped one becomes
// Ready=Unknown within the grace period (+5 s, the bound docs/locations.md gives for a killed mapper).
func (e *env) scenarioLocations(ctx context.Context) *Scenario {
	s := &Scenario{ID: 8, Title: "Location heartbeats", Subject: "mapper-controller"}
	start := time.Now()
	n, grace := e.cfg.Locations, e.cfg.LocationGracePeriod
	e.logf("scenario 8: %d SyncTargets with Leases renewed every %s, window %s, grace period %s", n, locationRenewInterval, e.cfg.LocationsWindow, grace)
	framework.InstallControlCRDs(e.tb, ctx, e.source)
	ctrl := framework.StartMapperController(e.tb, ctx, e.source, grace)
	defer func() { _ = ctrl.Stop() }()
	dyn := e.unthrottledSourceDynamic()
	names := locationNames(n)
	e.registerLocations(ctx, dyn, names)

	hb := e.startHeartbeats(ctx, names, grace)
	defer hb.stopAll()
	stoppedName := names[n-1]
	stopped := func() { hb.stop(stoppedName) }
	stopAll := hb.stopAll

	ready := e.waitLocationsReady(ctx, dyn, n, locationRenewInterval+time.Minute)
	if ready < n {
		s.Reason = fmt.Sprintf("only %d of %d locations became Ready=True before the window", ready, n)
		e.logf("scenario 8 not run: %s\n%s", s.Reason, ctrl.LogTail(30))
		return s
	}
	// Watch every SyncTarget from here on with an informer (its reflector re-watches when a
	// watch ends): a location other than the stopped one that leaves Ready=True is a false alarm.
	type transition struct {
		name, status, reason string
		at                   time.Time
	}
	var (
		mu          sync.Mutex
		transitions []transition
	)
	seen := func() []transition {
		mu.Lock()
		defer mu.Unlock()
		return append([]transition(nil), transitions...)
	}
	record := func(obj interface{}) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		st, err := synctarget.FromUnstructured(u)
		if err != nil {
			return
		}
		if c := meta.FindStatusCondition(st.Status.Conditions, controlv1alpha1.SyncTargetReady); c != nil && c.Status != metav1.ConditionTrue {
			mu.Lock()
			transitions = append(transitions, transition{st.Name, string(c.Status), c.Reason, time.Now()})
			mu.Unlock()
		}
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	informer := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0).ForResource(synctarget.Resource).Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, obj interface{}) { record(obj) }}); err != nil {
		e.tb.Fatal(err)
	}
	go informer.RunWithContext(watchCtx)
	if !cache.WaitForCacheSync(watchCtx.Done(), informer.HasSynced) {
		e.tb.Fatal("the SyncTarget informer did not sync")
	}

	e.logf("scenario 8: all %d locations Ready; measuring for %s; %s's heartbeat stops now", n, e.cfg.LocationsWindow, stoppedName)
	m0, err := scrapeFamilies(ctx, e.kaHTTP, e.source.URL+"/metrics")
	if err != nil {
		e.tb.Fatal(err)
	}
	pids := map[string]int{"mapper-controller": ctrl.PID, "kube-apiserver": e.source.APIServer.PID, "etcd": e.source.Etcd.Process.PID, "bench": selfPID}
	cpu0 := sampleCPU(e.tb, pids)
	t0 := time.Now()
	stopped()
	var rss []float64
	tick := time.NewTicker(5 * time.Second)
	end := time.After(e.cfg.LocationsWindow)
sampling:
	for {
		select {
		case <-tick.C:
			if p, err := sampleProc(ctrl.PID); err == nil {
				rss = append(rss, float64(p.RSS)/(1<<20))
			}
		case <-end:
			break sampling
		case <-ctx.Done():
			e.tb.Fatal(ctx.Err())
		}
	}
	tick.Stop()
	window := time.Since(t0).Seconds()
	cpu1 := sampleCPU(e.tb, pids)
	m1, err := scrapeFamilies(ctx, e.kaHTTP, e.source.URL+"/metrics")
	if err != nil {
		e.tb.Fatal(err)
	}
	last, err := sampleProc(ctrl.PID)
	if err != nil {
		e.tb.Fatal(err)
	}
	rss = append(rss, float64(last.RSS)/(1<<20))

	// The stopped location: Ready=Unknown (MapperLeaseExpired) within the grace period + 5 s of
	// its Lease's last renewal; the window may have ended before.
	lease, err := e.kube.CoordinationV1().Leases(contract.ControlNamespace).Get(ctx, stoppedName, metav1.GetOptions{})
	if err != nil {
		e.tb.Fatal(err)
	}
	renewed := t0
	if lease.Spec.RenewTime != nil {
		renewed = lease.Spec.RenewTime.Time
	}
	deadline := renewed.Add(grace + 5*time.Second)
	var unknownAt time.Time
	for {
		for _, t := range seen() {
			if t.name == stoppedName && t.status == string(metav1.ConditionUnknown) && t.reason == controlv1alpha1.ReasonLeaseExpired {
				unknownAt = t.at
				break
			}
		}
		// The window may have ended long after the deadline: look at least once.
		if !unknownAt.IsZero() || time.Now().After(deadline.Add(5*time.Second)) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	stopWatch()
	final, err := dyn.Resource(synctarget.Resource).List(ctx, metav1.ListOptions{})
	if err != nil {
		e.tb.Fatal(err)
	}
	stopAll()

	// Results.
	cpu := cpuDelta(cpu0, cpu1)
	rates := requestRates(m0, m1, window)
	var writes, leaseWrites, statusWrites float64
	for _, r := range rates {
		if !r.write() {
			continue
		}
		writes += r.perSecond
		switch r.resource {
		case "leases":
			leaseWrites += r.perSecond
		case "synctargets/status":
			statusWrites += r.perSecond
		}
	}
	// mapper-controller's leader election renews its own Lease once per retry period.
	election := 1 / controllerapp.NewOptions().LeaderElection.RetryPeriod.Seconds()
	modelLease, modelStatus := float64(n)/locationRenewInterval.Seconds()+election, float64(n)/locationStatusInterval.Seconds()
	rs := summarize(rss)
	s.Ran = true
	s.What = fmt.Sprintf("%d SyncTargets (`control.mapper.kcp.io/v1alpha1`) and %d Leases in `%s` of the source; %d heartbeats of "+
		"`pkg/mapper/heartbeat` (what every pull mapper runs; here in the benchmark process, all on one HTTP/2 connection) renew "+
		"each Lease every %s, started spread evenly over %s, and write each SyncTarget's status at most once every %s. "+
		"The real mapper-controller (cmd/mapper-controller, leader election on, `--location-grace-period=%s`) watches them. "+
		"Measured over a window of %.0f s once every location was Ready=True: CPU time and RSS of mapper-controller and "+
		"the source from `/proc`, and the source's request rates from the deltas of kube-apiserver's `%s` (by verb and "+
		"resource; all clients, including mapper-controller's leader election). At the start of the window the heartbeat of "+
		"`%s` stops, as a killed mapper would. There is no alternative to compare with; the write-load rows compare with "+
		"the heartbeat model: L/10 s Lease renewals plus mapper-controller's leader election (one renewal per 2 s retry period), "+
		"and L/60 s status writes (reached only by windows of a minute or more: every location writes its status once when "+
		"it starts, before the window).",
		n, n, contract.ControlNamespace, n, locationRenewInterval, locationRenewInterval, locationStatusInterval, grace, window,
		apiserverRequests, stoppedName)
	s.Comparisons = []Comparison{
		{Metric: "mapper-controller CPU", Unit: "cores", Ours: cpu["mapper-controller"] / window, AltValue: math.NaN(), LowerIsBetter: true},
		{Metric: "mapper-controller RSS (end of window)", Unit: "MiB", Ours: float64(last.RSS) / (1 << 20), AltValue: math.NaN(), LowerIsBetter: true},
		{Metric: "mapper-controller RSS (peak, VmHWM)", Unit: "MiB", Ours: float64(last.HWM) / (1 << 20), AltValue: math.NaN(), LowerIsBetter: true},
		{Metric: "source write requests (all writes)", Unit: "req/s", Ours: writes, Alternative: "the heartbeat model (Leases + status)", AltValue: modelLease + modelStatus, LowerIsBetter: true},
		{Metric: "source Lease writes", Unit: "req/s", Ours: leaseWrites, Alternative: "L / 10 s + leader election (1 / 2 s)", AltValue: modelLease, LowerIsBetter: true},
		{Metric: "source SyncTarget status writes", Unit: "req/s", Ours: statusWrites, Alternative: "L / 60 s", AltValue: modelStatus, LowerIsBetter: true},
		{Metric: "source kube-apiserver CPU", Unit: "cores", Ours: cpu["kube-apiserver"] / window, AltValue: math.NaN(), LowerIsBetter: true},
		{Metric: "source etcd CPU", Unit: "cores", Ours: cpu["etcd"] / window, AltValue: math.NaN(), LowerIsBetter: true},
	}

	falseAlarms := map[string]string{}
	for _, t := range seen() {
		if t.name != stoppedName {
			falseAlarms[t.name] = t.status + " (" + t.reason + ")"
		}
	}
	notReady, stoppedReady := 0, "no Ready condition"
	for i := range final.Items {
		st, err := synctarget.FromUnstructured(&final.Items[i])
		if err != nil {
			continue
		}
		if st.Name == stoppedName {
			if c := meta.FindStatusCondition(st.Status.Conditions, controlv1alpha1.SyncTargetReady); c != nil {
				stoppedReady = fmt.Sprintf("Ready=%s (%s) since %s", c.Status, c.Reason, c.LastTransitionTime.UTC().Format(time.RFC3339))
			}
			continue
		}
		if !meta.IsStatusConditionTrue(st.Status.Conditions, controlv1alpha1.SyncTargetReady) {
			notReady++
			if _, ok := falseAlarms[st.Name]; !ok {
				falseAlarms[st.Name] = "not Ready=True at the end"
			}
		}
	}
	keep := Check{Name: "every location whose Lease is renewed stays Ready=True for the whole window (every update seen by an informer), none falsely Unknown", Compared: n - 1, Failures: len(falseAlarms)}
	if len(falseAlarms) > 0 {
		keep.Detail = firstEntries(falseAlarms, 5)
	}
	after := unknownAt.Sub(renewed)
	mark := Check{Name: fmt.Sprintf("the location whose heartbeat stopped (%s) becomes Ready=Unknown (%s) within the grace period (%s) + 5 s of its last Lease renewal", stoppedName, controlv1alpha1.ReasonLeaseExpired, grace), Compared: 1}
	if unknownAt.IsZero() || after > grace+5*time.Second {
		mark.Failures = 1
		mark.Detail = fmt.Sprintf("last renewal %s, Ready=Unknown seen by the informer at %s; in the final list: %s", renewed.UTC().Format(time.RFC3339Nano), unknownAt.UTC().Format(time.RFC3339Nano), stoppedReady)
		var lines []string
		for _, l := range strings.Split(ctrl.LogTail(400), "\n") {
			if strings.Contains(l, stoppedName) || strings.Contains(l, "leader") || strings.HasPrefix(l, "E") {
				lines = append(lines, l)
			}
		}
		s.Notes = append(s.Notes, fmt.Sprintf("**%s was not marked in time.** mapper-controller's log lines about it, leader election and errors:\n\n```\n%s\n```", stoppedName, tailString(strings.Join(lines, "\n"), 3000)))
	}
	s.Checks = []Check{keep, mark}
	measured := after.Seconds()
	if unknownAt.IsZero() {
		measured = time.Since(renewed).Seconds()
	}
	s.Targets = []Target{atMost(fmt.Sprintf("a location whose Lease stops is Ready=Unknown ≤ grace period (%s) + 5 s after its last renewal", grace), measured, (grace + 5*time.Second).Seconds(), "%.1f s")}
	s.Notes = append(s.Notes,
		fmt.Sprintf("mapper-controller RSS sampled every 5 s: p50 %.1f MiB, max %.1f MiB (%d samples).", rs.P50, rs.Max, rs.N),
		fmt.Sprintf("CPU over the window: mapper-controller %.2f s, kube-apiserver %.1f s, etcd %.1f s, the benchmark process (the %d heartbeats and the watch) %.1f s.",
			cpu["mapper-controller"], cpu["kube-apiserver"], cpu["etcd"], n, cpu["bench"]),
		fmt.Sprintf("%s: its heartbeat stopped at the start of the window, %.1f s after its Lease's last renewal; Ready=Unknown %.1f s after that renewal.", stoppedName, t0.Sub(renewed).Seconds(), measured),
	)
	if notReady > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("**%d locations were not Ready=True at the end of the window.**", notReady))
	}
	rows := [][]string{}
	for _, r := range rates {
		if r.perSecond < 0.005 {
			continue
		}
		kind := "read"
		if r.write() {
			kind = "write"
		}
		rows = append(rows, []string{r.verb, r.resource, kind, fmtNum(r.perSecond)})
	}
	s.Tables = []Table{{Title: fmt.Sprintf("Source requests during the window (`%s` deltas / %.0f s; rows under 0.005/s left out):", apiserverRequests, window),
		Header: []string{"verb", "resource", "kind", "requests/s"}, Rows: rows}}
	s.Seconds = time.Since(start).Seconds()
	e.logf("scenario 8: mapper-controller %.3f cores, RSS %.1f MiB; source writes %.1f/s (Leases %.1f/s, status %.2f/s), kube-apiserver %.2f cores",
		cpu["mapper-controller"]/window, float64(last.RSS)/(1<<20), writes, leaseWrites, statusWrites, cpu["kube-apiserver"]/window)
	return s
}

// heartbeats are the heartbeats of pkg/mapper/heartbeat that a benchmark runs for its
// locations, as L independent pull mappers would.
type heartbeats struct {
	cancel  map[string]context.CancelFunc
	stopAll func()
}

// stop stops the heartbeat of name, as a killed mapper's.
func (h *heartbeats) stop(name string) { h.cancel[name]() }

// startHeartbeats starts one heartbeat per name (its Lease renewed every 10 s, its SyncTarget
// status written at most once a minute, always Ready), started spread evenly over a renew
// interval; stopAll stops them all and waits until they have returned.
func (e *env) startHeartbeats(ctx context.Context, names []string, grace time.Duration) *heartbeats {
	hbCtx, cancelAll := context.WithCancel(klog.NewContext(ctx, logr.Discard()))
	h := &heartbeats{cancel: map[string]context.CancelFunc{}}
	var wg sync.WaitGroup
	for i, name := range names {
		c, cancel := context.WithCancel(hbCtx)
		h.cancel[name] = cancel
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-time.After(time.Duration(i) * locationRenewInterval / time.Duration(len(names))):
			case <-c.Done():
				return
			}
			_ = heartbeat.Run(c, heartbeat.Config{
				Location: name, Identity: "bench-mapper-" + name, Version: "bench", Mode: controlv1alpha1.ModePull,
				Source: e.source.AdminConfig(), LeaseDuration: grace,
				Observe: func(context.Context, bool) heartbeat.Observation {
					return heartbeat.Observation{Ready: metav1.ConditionTrue, Reason: controlv1alpha1.ReasonMapperReady, Message: "bench heartbeat"}
				},
			})
		}()
	}
	var once sync.Once
	h.stopAll = func() {
		once.Do(func() {
			cancelAll()
			wg.Wait()
		})
	}
	return h
}

// registerLocations creates, for every name, the Lease (held by the mapper identity the
// heartbeat uses, renewed now) and then the SyncTarget, with 16 parallel clients; creating
// the Lease first keeps mapper-controller from seeing a SyncTarget without one.
func (e *env) registerLocations(ctx context.Context, dyn dynamic.Interface, names []string) {
	e.logf("registering %d locations (Lease and SyncTarget each)", len(names))
	jobs := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range jobs {
				lease := &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: contract.ControlNamespace},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("bench-mapper-" + name), LeaseDurationSeconds: ptr.To(int32(e.cfg.LocationGracePeriod / time.Second)),
						RenewTime: &metav1.MicroTime{Time: time.Now()}},
				}
				_, err := e.kube.CoordinationV1().Leases(contract.ControlNamespace).Create(ctx, lease, metav1.CreateOptions{})
				if err == nil || apierrors.IsAlreadyExists(err) {
					st := &controlv1alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench.cluster-mapper.io/scenario": "8"}}}
					var u *unstructured.Unstructured
					if u, err = synctarget.ToUnstructured(st); err == nil {
						_, err = dyn.Resource(synctarget.Resource).Create(ctx, u, metav1.CreateOptions{})
					}
				}
				if err != nil && !apierrors.IsAlreadyExists(err) {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("registering %s: %w", name, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, n := range names {
		jobs <- n
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		e.tb.Fatal(firstErr)
	}
}

// waitLocationsReady polls the SyncTargets until want of them are Ready=True or timeout
// passed; it returns how many were.
func (e *env) waitLocationsReady(ctx context.Context, dyn dynamic.Interface, want int, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		l, err := dyn.Resource(synctarget.Resource).List(ctx, metav1.ListOptions{})
		if err != nil {
			e.tb.Fatal(err)
		}
		ready := 0
		for i := range l.Items {
			if st, err := synctarget.FromUnstructured(&l.Items[i]); err == nil && meta.IsStatusConditionTrue(st.Status.Conditions, controlv1alpha1.SyncTargetReady) {
				ready++
			}
		}
		if ready >= want || time.Now().After(deadline) || ctx.Err() != nil {
			return ready
		}
		time.Sleep(time.Second)
	}
}

// sampleCPU returns the consumed CPU seconds of each process in pids, by role.
func sampleCPU(tb framework.TB, pids map[string]int) map[string]float64 {
	out := map[string]float64{}
	for role, pid := range pids {
		s, err := sampleProc(pid)
		if err != nil {
			tb.Fatalf("reading /proc of %s (pid %d): %v", role, pid, err)
		}
		out[role] = s.CPU
	}
	return out
}

// requestRate is the rate of one verb on one resource (resource/subresource).
type requestRate struct {
	verb, resource string
	perSecond      float64
}

// write reports whether the verb changes state.
func (r requestRate) write() bool {
	switch r.verb {
	case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY":
		return true
	}
	return false
}

// requestRates returns the per-second rates of apiserver_request_total between two scrapes,
// summed by verb and resource (over codes, scopes and versions), highest first.
func requestRates(before, after map[string]*dto.MetricFamily, seconds float64) []requestRate {
	sum := func(fams map[string]*dto.MetricFamily) map[[2]string]float64 {
		out := map[[2]string]float64{}
		f, ok := fams[apiserverRequests]
		if !ok {
			return out
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			res := l["resource"]
			if l["subresource"] != "" {
				res += "/" + l["subresource"]
			}
			if res == "" {
				res = "(non-resource)"
			}
			out[[2]string{l["verb"], res}] += metricValue(m)
		}
		return out
	}
	b, a := sum(before), sum(after)
	var out []requestRate
	for k, v := range a {
		if d := v - b[k]; d > 0 {
			out = append(out, requestRate{verb: k[0], resource: k[1], perSecond: d / seconds})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].perSecond != out[j].perSecond {
			return out[i].perSecond > out[j].perSecond
		}
		return out[i].verb+out[i].resource < out[j].verb+out[j].resource
	})
	return out
}

// firstEntries formats up to n entries of m, sorted by key.
func firstEntries(m map[string]string, n int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for i, k := range keys {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(keys)-n))
			break
		}
		parts = append(parts, k+": "+m[k])
	}
	return strings.Join(parts, "; ")
}
