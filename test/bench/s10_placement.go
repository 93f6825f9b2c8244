package bench

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	ctrlplacement "github.com/cluster-mapper/cluster-mapper/pkg/controller/placement"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// placementTolerance is the notReadyTolerance of scenario 10's Placements: shorter than the
// 5-minute default to keep the run short; the target is relative to it.
const placementTolerance = 30 * time.Second

// placementNamespace is the namespace of scenario 10's i-th Placement and its objects.
func placementNamespace(i int) string { return fmt.Sprintf("placed-%03d", i) }

// scenarioPlacement is scenario 10 ("Scale"): cfg.Objects unassigned ConfigMaps in
// cfg.Placements namespaces, one Placement per namespace choosing 2 of the cfg.Locations
// SyncTargets (all Ready, their heartbeats running in this process) per object, placed by the
// real mapper-controller. Measured: the time until every object is placed, the source's write
// rate and mapper-controller's CPU and RSS meanwhile; the time until a location whose heartbeat
// stops has no object left, from when it turned Ready=Unknown; writes in a quiet window after.
func (e *env) scenarioPlacement(ctx context.Context) *Scenario {
	s := &Scenario{ID: 10, Title: "Placement at scale", Subject: "mapper-controller"}
	start := time.Now()
	n, p, l, grace := e.cfg.Objects, e.cfg.Placements, e.cfg.Locations, e.cfg.LocationGracePeriod
	perNS := n / p
	n = perNS * p
	e.logf("scenario 10: %d ConfigMaps in %d namespaces, %d Placements choosing 2 of %d locations each", n, p, p, l)
	framework.InstallControlCRDs(e.tb, ctx, e.source)
	dyn := e.unthrottledSourceDynamic()
	names := locationNames(l)
	framework.EnsureNamespace(e.tb, ctx, e.source, contract.ControlNamespace)
	e.registerLocations(ctx, dyn, names)
	hb := e.startHeartbeats(ctx, names, grace)
	defer hb.stopAll()
	if ready := e.waitLocationsReady(ctx, dyn, l, locationRenewInterval+time.Minute); ready < l {
		s.Reason = fmt.Sprintf("only %d of %d locations became Ready=True", ready, l)
		return s
	}
	e.createUnassigned(ctx, p, perNS)

	metricsPort, err := framework.FreePort()
	if err != nil {
		e.tb.Fatal(err)
	}
	ctrl := framework.StartMapperController(e.tb, ctx, e.source, grace, fmt.Sprintf("--bind-address=127.0.0.1:%d", metricsPort), "--profiling")
	ctrlTarget := profileTarget{process: "mapper-controller", base: fmt.Sprintf("http://127.0.0.1:%d", metricsPort), client: http.DefaultClient}
	defer func() { _ = ctrl.Stop() }()
	// Every process of the machine's work: the bench process runs the 1,000 heartbeats.
	pids := map[string]int{"mapper-controller": ctrl.PID, "kube-apiserver": e.source.APIServer.PID, "etcd": e.source.Etcd.Process.PID, "bench": selfPID}
	if e.mapper != nil {
		pids["mapper-apiserver"] = e.mapper.Process.PID
	}
	m0, err := scrapeFamilies(ctx, e.kaHTTP, e.source.URL+"/metrics")
	if err != nil {
		e.tb.Fatal(err)
	}
	cpu0 := sampleCPU(e.tb, pids)
	t0 := time.Now()
	// The first 30 s of the initial placement, when both processes are busiest.
	const window = "scenario 10, the first 30 s of the initial placement"
	waitKA := e.startCPUProfile(ctx, e.kaTarget(), "s10-placement-kube-apiserver", window, 30)
	waitCtrl := e.startCPUProfile(ctx, ctrlTarget, "s10-placement-mapper-controller", window, 30)
	placements := dyn.Resource(ctrlplacement.Resource)
	for i := range p {
		ns := placementNamespace(i)
		pl := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": controlv1alpha1.SchemeGroupVersion.String(), "kind": "Placement",
			"metadata": map[string]interface{}{"name": "spread", "namespace": ns},
			"spec": map[string]interface{}{
				"resources":         []interface{}{map[string]interface{}{"apiGroups": []interface{}{""}, "apiVersions": []interface{}{"v1"}, "resources": []interface{}{"configmaps"}}},
				"locationSelector":  map[string]interface{}{},
				"numberOfLocations": int64(2),
				"notReadyTolerance": placementTolerance.String(),
			},
		}}
		if _, err := placements.Namespace(ns).Create(ctx, pl, metav1.CreateOptions{}); err != nil {
			e.tb.Fatal(err)
		}
	}
	// Placed: every Placement Ready with all its namespace's objects (status is written after
	// its objects).
	placedBy := func() (placed int64, byLocation map[string]bool, err error) {
		list, err := placements.List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, nil, err
		}
		byLocation = map[string]bool{}
		for i := range list.Items {
			var pl controlv1alpha1.Placement
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &pl); err != nil {
				return 0, nil, err
			}
			if pl.Status.ObservedGeneration == pl.Generation && meta.IsStatusConditionTrue(pl.Status.Conditions, controlv1alpha1.PlacementReady) {
				placed += pl.Status.PlacedObjects
			}
			for _, loc := range pl.Status.Locations {
				byLocation[loc] = true
			}
		}
		return placed, byLocation, nil
	}
	var rss []float64
	deadline := time.Now().Add(5 * time.Minute)
	var placedAt time.Time
	for placedAt.IsZero() && time.Now().Before(deadline) {
		placed, _, err := placedBy()
		if err != nil {
			e.tb.Fatal(err)
		}
		if ps, err := sampleProc(ctrl.PID); err == nil {
			rss = append(rss, float64(ps.RSS)/(1<<20))
		}
		if placed == int64(n) {
			placedAt = time.Now()
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	initial := time.Since(t0).Seconds()
	cpu1 := sampleCPU(e.tb, pids)
	m1, err := scrapeFamilies(ctx, e.kaHTTP, e.source.URL+"/metrics")
	if err != nil {
		e.tb.Fatal(err)
	}
	if placedAt.IsZero() {
		s.Reason = fmt.Sprintf("not every object was placed within 5 minutes\n%s", ctrl.LogTail(20))
		e.logf("scenario 10 not run: %s", s.Reason)
		return s
	}
	applies := applyRate(m0, m1, initial)
	// After the measurement: a placement shorter than the profiles waits for them here.
	for _, wait := range []func() *Profile{waitKA, waitCtrl} {
		if prof := wait(); prof != nil {
			s.Profiles = append(s.Profiles, *prof)
		}
	}
	if prof := e.heapProfile(ctx, ctrlTarget, "s10-placement-heap-mapper-controller", "scenario 10, after the initial placement, after a forced GC"); prof != nil {
		s.Profiles = append(s.Profiles, *prof)
	}
	e.logf("scenario 10: %d objects placed in %.1f s (%.0f applies/s)", n, initial, applies)

	// A quiet window: heartbeats write SyncTarget status, nothing of the placement changes.
	quiet := min(30*time.Second, e.cfg.LocationsWindow)
	m2, cpu2 := m1, sampleCPU(e.tb, pids)
	// What the heartbeats alone cost kube-apiserver: the share of the machine that initial
	// placement cannot use.
	waitQuiet := e.startCPUProfile(ctx, e.kaTarget(), "s10-quiet-kube-apiserver", "scenario 10, the quiet window (the 1,000 heartbeats alone)", int(quiet.Seconds()))
	time.Sleep(quiet)
	if prof := waitQuiet(); prof != nil {
		s.Profiles = append(s.Profiles, *prof)
	}
	m3, err := scrapeFamilies(ctx, e.kaHTTP, e.source.URL+"/metrics")
	if err != nil {
		e.tb.Fatal(err)
	}
	cpu3 := sampleCPU(e.tb, pids)
	quietApplies := applyRate(m2, m3, quiet.Seconds()) * quiet.Seconds()

	// A location goes away: its objects move within the tolerance (+10 s) of its Ready=Unknown.
	_, before, err := placedBy()
	if err != nil {
		e.tb.Fatal(err)
	}
	gone := ""
	for _, name := range names {
		if before[name] {
			gone = name
			break
		}
	}
	hb.stop(gone)
	var unknownSince time.Time
	var movedAt time.Time
	moveDeadline := time.Now().Add(grace + placementTolerance + 2*time.Minute)
	for movedAt.IsZero() && time.Now().Before(moveDeadline) {
		if unknownSince.IsZero() {
			if st, err := synctarget.NewClient(dyn).GetStatus(ctx, gone); err == nil {
				if c := meta.FindStatusCondition(st.Status.Conditions, controlv1alpha1.SyncTargetReady); c != nil && c.Status != metav1.ConditionTrue {
					unknownSince = c.LastTransitionTime.Time
				}
			}
		}
		if _, by, err := placedBy(); err == nil && !unknownSince.IsZero() && !by[gone] {
			movedAt = time.Now()
		}
		time.Sleep(500 * time.Millisecond)
	}
	cpuEnd := sampleCPU(e.tb, pids)
	last, err := sampleProc(ctrl.PID)
	if err != nil {
		e.tb.Fatal(err)
	}
	// Check every object: two locations, none of them the gone one, written by its Placement.
	wrong := map[string]string{}
	for i := range p {
		ns := placementNamespace(i)
		list, err := e.kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			e.tb.Fatal(err)
		}
		for _, cm := range list.Items {
			locs, err := contract.ParseLocations(cm.Annotations[contract.AssignedLocationsAnnotation])
			if err != nil || len(locs) != 2 || slices.Contains(locs, gone) || cm.Annotations[ctrlplacement.OwnerAnnotation] != "spread" {
				wrong[ns+"/"+cm.Name] = fmt.Sprintf("%v by %q", locs, cm.Annotations[ctrlplacement.OwnerAnnotation])
			}
		}
	}

	s.Ran = true
	moved := movedAt.Sub(unknownSince).Seconds()
	if movedAt.IsZero() {
		moved = math.Inf(1)
	}
	cpu := cpuDelta(cpu0, cpu1)
	quietCPU := cpuDelta(cpu2, cpu3)
	moveCPU := cpuDelta(cpu3, cpuEnd)
	rs := summarize(rss)
	floor := placementFloor(cpu, quietCPU, initial, quiet.Seconds(), float64(goruntime.NumCPU()))
	s.What = fmt.Sprintf("%d ConfigMaps without an assignment in %d namespaces (%d each) of the source, %d SyncTargets kept Ready by "+
		"%d heartbeats of `pkg/mapper/heartbeat` in this process (as in scenario 8), and one Placement per namespace: "+
		"`numberOfLocations: 2` of all locations, Duplicate, `notReadyTolerance: %s`. The real mapper-controller "+
		"(cmd/mapper-controller, started after the objects exist) places them. Measured: the time from creating the "+
		"Placements until every Placement is Ready with all its objects placed (its status is written after its objects); "+
		"the source's server-side applies (`%s`, verb APPLY) and mapper-controller's CPU meanwhile; a %s quiet window; then "+
		"the heartbeat of one location holding objects stops, and the time from its Ready condition leaving True "+
		"(lastTransitionTime, after the %s grace period) until no Placement lists it is measured.",
		n, p, perNS, l, l, placementTolerance, apiserverRequests, quiet, grace)
	s.Comparisons = []Comparison{
		{Metric: "initial placement", Unit: "s", Ours: initial, Alternative: "target", AltValue: 60, LowerIsBetter: true},
		{Metric: "server-side applies during initial placement", Unit: "req/s", Ours: applies, AltValue: math.NaN(), LowerIsBetter: false},
		{Metric: "mapper-controller CPU during initial placement", Unit: "cores", Ours: cpu["mapper-controller"] / initial, AltValue: math.NaN(), LowerIsBetter: true},
		{Metric: "mapper-controller RSS (after the move)", Unit: "MiB", Ours: float64(last.RSS) / (1 << 20), AltValue: math.NaN(), LowerIsBetter: true},
		{Metric: "mapper-controller RSS (peak, VmHWM)", Unit: "MiB", Ours: float64(last.HWM) / (1 << 20), AltValue: math.NaN(), LowerIsBetter: true},
		{Metric: fmt.Sprintf("mapper-controller CPU in the %s quiet window", quiet), Unit: "cores", Ours: quietCPU["mapper-controller"] / quiet.Seconds(), AltValue: math.NaN(), LowerIsBetter: true},
		{Metric: "initial placement's floor on this machine with a controller that costs nothing (see the notes)", Unit: "s", Ours: floor.seconds, Alternative: "target", AltValue: 60, LowerIsBetter: true},
		{Metric: "re-placement after Ready left True", Unit: "s", Ours: moved, Alternative: "tolerance + 10 s", AltValue: (placementTolerance + 10*time.Second).Seconds(), LowerIsBetter: true},
	}
	s.Targets = []Target{
		atMost("initial placement of every object within 60 s", initial, 60, "%.1f s"),
		atMost(fmt.Sprintf("a location not Ready is re-placed within the tolerance (%s) + 10 s", placementTolerance), moved, (placementTolerance + 10*time.Second).Seconds(), "%.1f s"),
	}
	check := Check{Name: fmt.Sprintf("every object is assigned to 2 locations by its Placement, none of them the stopped %s", gone), Compared: n, Failures: len(wrong)}
	if len(wrong) > 0 {
		check.Detail = firstEntries(wrong, 5)
	}
	quietCheck := Check{Name: fmt.Sprintf("no server-side apply in the %s quiet window (unchanged inputs write nothing)", quiet), Compared: 1}
	if quietApplies >= 1 {
		quietCheck.Failures = 1
		quietCheck.Detail = fmt.Sprintf("%.0f applies", quietApplies)
	}
	s.Checks = []Check{check, quietCheck}
	s.Notes = append(s.Notes,
		fmt.Sprintf("mapper-controller RSS sampled every 0.5 s during the initial placement: p50 %.1f MiB, max %.1f MiB (%d samples).", rs.P50, rs.Max, rs.N),
		fmt.Sprintf("CPU: initial placement %s; the quiet window (the heartbeats alone) %s; the move mapper-controller %.1f s.", cpuSummary(cpu, initial), cpuSummary(quietCPU, quiet.Seconds()), moveCPU["mapper-controller"]),
		fmt.Sprintf("CPU per placed object, beyond what the heartbeats cost in the quiet window: %s. "+
			"kube-apiserver and etcd alone need %.0f CPU-seconds for the %d objects, and the heartbeats leave %.2f of the machine's %d cores: "+
			"so no controller can place them here in less than %.1f s.",
			floor.perObject(n), floor.sourceCPU, n, floor.spareCores, goruntime.NumCPU(), floor.seconds),
		fmt.Sprintf("%s's heartbeat stopped; Ready left True at %s, no Placement listed it %.1f s later.", gone, unknownSince.UTC().Format(time.RFC3339), moved),
	)
	s.Seconds = time.Since(start).Seconds()
	e.logf("scenario 10: placed in %.1f s, %.0f applies/s, mapper-controller %.2f cores, RSS %.0f MiB; re-placed %.1f s after Ready left True",
		initial, applies, cpu["mapper-controller"]/initial, float64(last.RSS)/(1<<20), moved)
	return s
}

// applyRate is the rate of server-side applies (verb APPLY) between two scrapes.
func applyRate(before, after map[string]*dto.MetricFamily, seconds float64) float64 {
	var out float64
	for _, r := range requestRates(before, after, seconds) {
		if r.verb == "APPLY" {
			out += r.perSecond
		}
	}
	return out
}

// createUnassigned creates namespaces placementNamespace(0..p-1) with perNS ConfigMaps each and
// no assignment, with cfg.LoadClients parallel clients.
func (e *env) createUnassigned(ctx context.Context, p, perNS int) {
	jobs := make(chan [2]int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range e.cfg.LoadClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				ns := placementNamespace(j[0])
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", j[1]), Namespace: ns}, Data: map[string]string{"k": strings.Repeat("v", 64)}}
				_, err := e.kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range p {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: placementNamespace(i)}}
		if _, err := e.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			e.tb.Fatal(err)
		}
	}
	for i := range p {
		for k := range perNS {
			jobs <- [2]int{i, k}
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		e.tb.Fatal(firstErr)
	}
}

// floor is what initial placement costs the source beyond the steady load of the heartbeats,
// and the shortest initial placement that leaves possible on this machine.
type floor struct {
	// extra is each process's CPU-seconds during the initial placement minus its rate in the
	// quiet window (the heartbeats alone) over the same time; never negative.
	extra map[string]float64
	// sourceCPU is extra of kube-apiserver and etcd: what the source needs for the writes,
	// whatever the controller.
	sourceCPU float64
	// spareCores are the cores the heartbeats leave (cores minus the quiet window's rate of
	// every process).
	spareCores float64
	// seconds is sourceCPU / spareCores (+Inf when nothing is spare).
	seconds float64
}

// placementFloor computes the floor from the CPU-seconds of every process during the initial
// placement (initial seconds long) and during the quiet window (quiet seconds long), on a
// machine of cores cores.
func placementFloor(initialCPU, quietCPU map[string]float64, initial, quiet, cores float64) floor {
	f := floor{extra: map[string]float64{}, spareCores: cores}
	for role, used := range initialCPU {
		rate := quietCPU[role] / quiet
		f.extra[role] = max(used-rate*initial, 0)
		f.spareCores -= rate
	}
	f.sourceCPU = f.extra["kube-apiserver"] + f.extra["etcd"]
	f.seconds = math.Inf(1)
	if f.spareCores > 0 {
		f.seconds = f.sourceCPU / f.spareCores
	}
	return f
}

// perObject formats extra per object of n, in milliseconds.
func (f floor) perObject(n int) string {
	var parts []string
	for _, role := range slices.Sorted(maps.Keys(f.extra)) {
		parts = append(parts, fmt.Sprintf("%s %.2f ms", role, f.extra[role]/float64(n)*1000))
	}
	return strings.Join(parts, ", ")
}

// cpuSummary lists the CPU seconds of each process in cpu over a window of seconds, and their
// sum in cores, e.g. "etcd 10.0 s, kube-apiserver 50.0 s (1.20 cores in all over 50.0 s)".
func cpuSummary(cpu map[string]float64, seconds float64) string {
	var parts []string
	var sum float64
	for _, role := range slices.Sorted(maps.Keys(cpu)) {
		parts = append(parts, fmt.Sprintf("%s %.1f s", role, cpu[role]))
		sum += cpu[role]
	}
	return fmt.Sprintf("%s (%.2f cores in all over %.1f s)", strings.Join(parts, ", "), sum/seconds, seconds)
}
