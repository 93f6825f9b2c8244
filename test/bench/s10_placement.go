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
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"

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

// scenarioPlacement is scenario 10: applications placed at scale. cfg.Objects objects as
// applications of objectsPerApp (a Deployment with the ConfigMap, Secret and ServiceAccount its
// Pod template references and a Service selecting it), none assigned, in cfg.Placements
// namespaces; one Placement per namespace selecting only the Deployments, `spreadBy: Object`
// and `numberOfLocations: 2` of the cfg.Locations SyncTargets (all Ready, their heartbeats
// running in this process), placed by the real mapper-controller: its placement controller
// places the Deployments and its dependency controller makes the rest follow. Measured: the
// time until every application is placed whole, against the floor of the same run (what
// kube-apiserver and etcd need for the writes alone, see placementFloor); the source's writes
// per placed object; mapper-controller's CPU and RSS; the time until a location whose
// heartbeat stops holds no object, from when it turned Ready=Unknown; writes in a quiet window.
func (e *env) scenarioPlacement(ctx context.Context) *Scenario {
	s := &Scenario{ID: 10, Title: "Placement of applications at scale", Subject: "mapper-controller"}
	start := time.Now()
	p, l, grace := e.cfg.Placements, e.cfg.Locations, e.cfg.LocationGracePeriod
	perNS := e.cfg.Objects / objectsPerApp / p
	apps := perNS * p
	n := apps * objectsPerApp
	e.logf("scenario 10: %d objects as %d applications in %d namespaces, %d Placements choosing 2 of %d locations for each Deployment", n, apps, p, p, l)
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
	e.createApps(ctx, p, perNS)
	metaCfg := e.source.AdminConfig()
	metaCfg.QPS = -1
	metaClient, err := metadata.NewForConfig(metaCfg)
	if err != nil {
		e.tb.Fatal(err)
	}
	trackCtx, stopTracking := context.WithCancel(ctx)
	defer stopTracking()
	tracker := e.trackApps(trackCtx, metaClient, p, perNS)

	metricsPort, err := framework.FreePort()
	if err != nil {
		e.tb.Fatal(err)
	}
	ctrl := framework.StartMapperController(e.tb, ctx, e.source, grace, fmt.Sprintf("--bind-address=127.0.0.1:%d", metricsPort), "--profiling")
	ctrlTarget := profileTarget{process: "mapper-controller", base: fmt.Sprintf("http://127.0.0.1:%d", metricsPort), client: http.DefaultClient}
	defer func() { _ = ctrl.Stop() }()
	// mapper-controller's informers list the workloads and their dependencies when it starts
	// leading; the measurement starts once they have and the namespaces they queued are
	// worked off.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		fams, err := scrapeFamilies(ctx, http.DefaultClient, ctrlTarget.base+"/metrics")
		if err != nil {
			return false, nil
		}
		return unlabeledValue(fams, "mapper_controller_dependency_informers_synced") == 1 &&
			labeledValue(fams, "workqueue_depth", "name", "dependencies") == 0, nil
	}); err != nil {
		e.logf("scenario 10: mapper-controller's informers did not list the objects within 2 minutes; measuring anyway")
	}
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
				"resources":         []interface{}{map[string]interface{}{"apiGroups": []interface{}{"apps"}, "apiVersions": []interface{}{"v1"}, "resources": []interface{}{"deployments"}}},
				"locationSelector":  map[string]interface{}{},
				"numberOfLocations": int64(2),
				"spreadBy":          controlv1alpha1.SpreadByObject,
				"notReadyTolerance": placementTolerance.String(),
			},
		}}
		if _, err := placements.Namespace(ns).Create(ctx, pl, metav1.CreateOptions{}); err != nil {
			e.tb.Fatal(err)
		}
	}
	var rss []float64
	placedAt := tracker.waitPlaced(ctx, 2, "spread", "", 10*time.Minute, func() {
		if ps, err := sampleProc(ctrl.PID); err == nil {
			rss = append(rss, float64(ps.RSS)/(1<<20))
		}
	})
	initial := time.Since(t0).Seconds()
	cpu1 := sampleCPU(e.tb, pids)
	m1, err := scrapeFamilies(ctx, e.kaHTTP, e.source.URL+"/metrics")
	if err != nil {
		e.tb.Fatal(err)
	}
	if placedAt.IsZero() {
		placed, wrong := tracker.check(2, "spread", "")
		s.Reason = fmt.Sprintf("%d of %d applications were placed whole within 10 minutes (%s)\n%s", placed, apps, firstEntries(wrong, 5), ctrl.LogTail(20))
		e.logf("scenario 10 not run: %s", s.Reason)
		return s
	}
	applies := applyRate(m0, m1, initial)
	writes := objectWrites(m0, m1, initial)
	// After the measurement: a placement shorter than the profiles waits for them here.
	for _, wait := range []func() *Profile{waitKA, waitCtrl} {
		if prof := wait(); prof != nil {
			s.Profiles = append(s.Profiles, *prof)
		}
	}
	if prof := e.heapProfile(ctx, ctrlTarget, "s10-placement-heap-mapper-controller", "scenario 10, after the initial placement, after a forced GC"); prof != nil {
		s.Profiles = append(s.Profiles, *prof)
	}
	e.logf("scenario 10: %d objects placed in %.1f s (%.0f applies/s, %.3f writes per object)", n, initial, applies, writes.total()/float64(n))

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
	quietWrites := objectWrites(m2, m3, quiet.Seconds()).total()

	// A location goes away: its applications move whole within the tolerance (+10 s) of its
	// Ready=Unknown.
	gone := ""
	if locs, _, _ := tracker.assignment(0, placementNamespace(0), appName(0)); locs != "" {
		if parsed, err := contract.ParseLocations(locs); err == nil && len(parsed) > 0 {
			gone = parsed[0]
		}
	}
	hb.stop(gone)
	// The move: the grace period, the tolerance and the re-placement, when mapper-controller's
	// work is its reaction to one location leaving (every Placement re-ranks, the moved
	// groups' dependencies follow).
	moveSeconds := int((grace + placementTolerance + 20*time.Second).Seconds())
	waitMove := e.startCPUProfile(ctx, ctrlTarget, "s10-move-mapper-controller",
		"scenario 10, from the stop of one location's heartbeat until 20 s after its tolerance ran out", moveSeconds)
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
		if placed, _ := tracker.check(2, "spread", gone); !unknownSince.IsZero() && placed == apps {
			movedAt = time.Now()
		}
		time.Sleep(500 * time.Millisecond)
	}
	cpuEnd := sampleCPU(e.tb, pids)
	if prof := waitMove(); prof != nil {
		s.Profiles = append(s.Profiles, *prof)
	}
	last, err := sampleProc(ctrl.PID)
	if err != nil {
		e.tb.Fatal(err)
	}
	// Check every application: the Deployment on two locations by its Placement, none of them
	// the gone one, and each dependency on exactly the Deployment's.
	placedAfter, wrong := tracker.check(2, "spread", gone)

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
	perObject := writes.total() / float64(n)
	s.What = fmt.Sprintf("%d objects without an assignment in %d namespaces of the source: %d applications of %d objects each "+
		"(a Deployment with the ConfigMap, Secret and ServiceAccount its Pod template references and a Service selecting it), "+
		"%d SyncTargets kept Ready by %d heartbeats of `pkg/mapper/heartbeat` in this process (as in scenario 8), and one Placement "+
		"per namespace selecting only the Deployments: `spreadBy: Object`, `numberOfLocations: 2` of all locations, Duplicate, "+
		"`notReadyTolerance: %s`. The real mapper-controller (cmd/mapper-controller, started after the objects exist) places the "+
		"Deployments and its dependency controller makes the rest follow. Measured: the time from creating the Placements until "+
		"every application is placed whole (the Deployment on 2 locations, each of its objects on the same 2; read from metadata "+
		"informers of this process, which listed before the measurement), against the floor of the same run (see the notes); the "+
		"source's writes of the objects (`%s`, verbs APPLY, PATCH and UPDATE) per placed object; mapper-controller's CPU and RSS; a "+
		"%s quiet window; then the heartbeat of one location holding applications stops, and the time from its Ready condition "+
		"leaving True (lastTransitionTime, after the %s grace period) until no object is assigned to it is measured.",
		n, p, apps, objectsPerApp, l, l, placementTolerance, apiserverRequests, quiet, grace)
	s.Comparisons = []Comparison{
		{Metric: "initial placement of every application", Unit: "s", Ours: initial, Alternative: "the floor of this run (a controller that costs nothing)", AltValue: floor.seconds, LowerIsBetter: true},
		{Metric: "source writes per placed object (placement and dependencies)", Unit: "writes", Ours: perObject, Alternative: "one write per object", AltValue: 1, LowerIsBetter: true},
		{Metric: "server-side applies during initial placement", Unit: "req/s", Ours: applies, AltValue: math.NaN(), LowerIsBetter: false},
		{Metric: "mapper-controller CPU during initial placement", Unit: "cores", Ours: cpu["mapper-controller"] / initial, AltValue: math.NaN(), LowerIsBetter: true},
		{Metric: "mapper-controller RSS (after the move)", Unit: "MiB", Ours: float64(last.RSS) / (1 << 20), AltValue: math.NaN(), LowerIsBetter: true},
		{Metric: "mapper-controller RSS (peak, VmHWM)", Unit: "MiB", Ours: float64(last.HWM) / (1 << 20), AltValue: math.NaN(), LowerIsBetter: true},
		{Metric: fmt.Sprintf("mapper-controller CPU in the %s quiet window", quiet), Unit: "cores", Ours: quietCPU["mapper-controller"] / quiet.Seconds(), AltValue: math.NaN(), LowerIsBetter: true},
		{Metric: "re-placement after Ready left True", Unit: "s", Ours: moved, Alternative: "tolerance + 10 s", AltValue: (placementTolerance + 10*time.Second).Seconds(), LowerIsBetter: true},
	}
	s.Targets = []Target{
		atMost("initial placement of every application within 1.3× the floor of the same run", initial/floor.seconds, 1.3, "%.2f×"),
		atMost("source writes per placed object, placement and dependencies together, ≤ 1.05", perObject, 1.05, "%.3f"),
		atMost(fmt.Sprintf("a location not Ready is re-placed, dependencies included, within the tolerance (%s) + 10 s", placementTolerance), moved, (placementTolerance + 10*time.Second).Seconds(), "%.1f s"),
	}
	check := Check{Name: fmt.Sprintf("every application placed whole: its Deployment on 2 locations by its Placement, none of them the stopped %s, and each of its objects on the same 2", gone),
		Compared: apps, Failures: apps - placedAfter}
	if len(wrong) > 0 {
		check.Detail = firstEntries(wrong, 5)
	}
	quietCheck := Check{Name: fmt.Sprintf("no write of an object in the %s quiet window (unchanged inputs write nothing)", quiet), Compared: 1}
	if quietWrites >= 1 {
		quietCheck.Failures = 1
		quietCheck.Detail = fmt.Sprintf("%.0f writes", quietWrites)
	}
	s.Checks = []Check{check, quietCheck}
	s.Notes = append(s.Notes,
		fmt.Sprintf("mapper-controller RSS sampled every 0.5 s during the initial placement: p50 %.1f MiB, max %.1f MiB (%d samples).", rs.P50, rs.Max, rs.N),
		fmt.Sprintf("CPU: initial placement %s; the quiet window (the heartbeats alone) %s; the move mapper-controller %.1f s.", cpuSummary(cpu, initial), cpuSummary(quietCPU, quiet.Seconds()), moveCPU["mapper-controller"]),
		fmt.Sprintf("Writes of the objects during the initial placement: %s (%d objects).", writes, n),
		fmt.Sprintf("CPU per placed object, beyond what the heartbeats cost in the quiet window: %s. "+
			"kube-apiserver and etcd alone need %.0f CPU-seconds for the %d objects, and the heartbeats leave %.2f of the machine's %d cores: "+
			"so no controller can place them here in less than %.1f s (the floor); the initial placement took %.2f× that.",
			floor.perObject(n), floor.sourceCPU, n, floor.spareCores, goruntime.NumCPU(), floor.seconds, initial/floor.seconds),
		fmt.Sprintf("%s's heartbeat stopped; Ready left True at %s, no object was assigned to it %.1f s later.", gone, unknownSince.UTC().Format(time.RFC3339), moved),
	)
	s.Seconds = time.Since(start).Seconds()
	e.logf("scenario 10: placed in %.1f s (floor %.1f s, %.2f×), %.3f writes per object, mapper-controller %.2f cores, RSS %.0f MiB; re-placed %.1f s after Ready left True",
		initial, floor.seconds, initial/floor.seconds, perObject, cpu["mapper-controller"]/initial, float64(last.RSS)/(1<<20), moved)
	return s
}

// labeledValue returns the value of the sample of the metric family name whose label has
// value (0 when there is none).
func labeledValue(fams map[string]*dto.MetricFamily, name, label, value string) float64 {
	for _, m := range fams[name].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label && lp.GetValue() == value {
				return metricValue(m)
			}
		}
	}
	return 0
}

// unlabeledValue returns the value of the first sample of the metric family name (0 when
// there is none).
func unlabeledValue(fams map[string]*dto.MetricFamily, name string) float64 {
	for _, m := range fams[name].GetMetric() {
		return metricValue(m)
	}
	return 0
}

// writeCounts are the writes of scenario 10's objects, by verb and resource.
type writeCounts map[string]float64

// objectWrites returns the writes (verbs APPLY, PATCH, UPDATE) of the resources of scenario
// 10's applications between two scrapes, seconds apart.
func objectWrites(before, after map[string]*dto.MetricFamily, seconds float64) writeCounts {
	out := writeCounts{}
	for _, r := range requestRates(before, after, seconds) {
		if r.verb != "APPLY" && r.verb != "PATCH" && r.verb != "UPDATE" {
			continue
		}
		for _, gvr := range appResources {
			if r.resource == gvr.Resource {
				out[r.verb+" "+r.resource] += r.perSecond * seconds
			}
		}
	}
	return out
}

// total returns the number of writes.
func (w writeCounts) total() float64 {
	var sum float64
	for _, v := range w {
		sum += v
	}
	return sum
}

// String lists the writes by verb and resource, sorted.
func (w writeCounts) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(w)) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, w[k]))
	}
	return strings.Join(parts, ", ")
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
