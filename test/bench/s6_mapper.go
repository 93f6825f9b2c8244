package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"

	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// designEstimate is the original design's estimate for a mapper's initial sync: 50,000 objects
// in 1000 s at client-side throttling, i.e. 50 objects/s.
const designObjectsPerSecond = 50.0

// buildMapper builds cmd/mapper without failing the run: scenario 6 is reported as not run
// when the mapper does not exist or does not build.
func buildMapper(tb framework.TB) (string, error) {
	root := moduleRoot(tb)
	if _, err := os.Stat(filepath.Join(root, "cmd", "mapper")); err != nil {
		return "", fmt.Errorf("cmd/mapper does not exist in this checkout")
	}
	out := filepath.Join(tb.TempDir(), "mapper")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/mapper")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/mapper failed: %v: %s", err, tailString(string(b), 600))
	}
	return out, nil
}

func tailString(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// mapperRun is one initial sync of the bulk location onto a new target.
type mapperRun struct {
	args      []string
	objects   int
	seconds   float64
	first     float64 // seconds to the first object on the target
	rate      float64
	cpu       map[string]float64
	mapperCPU float64
	// targetCPU is the target kube-apiserver's CPU seconds during the sync.
	targetCPU float64
	// profile is the mapper's CPU profile during the sync (nil when not taken).
	profile  *Profile
	complete bool
	logTail  string
	// reopened counts the target's watches that ended and were opened again; listed the
	// resources counted by LIST because a watch could not resume (arrivals).
	reopened, listed int
	// sourceRequests counts the source kube-apiserver's requests on the mapped resources
	// during the sync, by verb (apiserver_request_total): the deletion protocol's writes.
	sourceRequests map[string]float64
	// sourceWatches is how many watches the source kube-apiserver served when the sync
	// started (apiserver_longrunning_requests, verb WATCH): every one of them is sent each
	// event of the sync's source writes.
	sourceWatches float64
}

// TunedMapperArgs lift the mapper's client-side throttle for the second sync of scenario 6.
var TunedMapperArgs = []string{"--workers=16", "--target-qps=1000", "--target-burst=1000"}

// scenarioMapper is scenario 6: one mapper maps the location "bulk" onto a new target
// kube-apiserver, once with its default flags and once with the client-side throttle lifted;
// time from the mapper's process start until every object of the location is on the target.
func (e *env) scenarioMapper(ctx context.Context) *Scenario {
	s := &Scenario{ID: 6, Title: "Mapper initial sync"}
	start := time.Now()
	if e.cfg.SkipMapper {
		s.Reason = "skipped with --skip-mapper"
		return s
	}
	bin, err := buildMapper(e.tb)
	if err != nil {
		s.Reason = err.Error()
		e.logf("scenario 6 not run: %v", err)
		return s
	}
	want := e.ds.countAssigned(BulkLocation)
	cms := len(e.ds.locationObjects(BulkLocation, kindConfigMap))
	def := e.mapperSync(ctx, bin, want, nil, true)
	// The second run pays the deletion protocol as the first did: the first run's finalizers
	// are taken off the source objects before it starts.
	e.releaseFinalizers(ctx, BulkLocation)
	tuned := e.mapperSync(ctx, bin, want, TunedMapperArgs, false)
	if def.profile != nil {
		s.Profiles = append(s.Profiles, *def.profile)
	}

	s.Ran = true
	s.What = fmt.Sprintf("One mapper (cmd/mapper) maps location `%s` — %d ConfigMaps and %d Deployments spread over up to %d namespaces — "+
		"from its view onto a new, empty target kube-apiserver (sharing the source's etcd), twice: with its default flags "+
		"(no client-side throttle, %d workers) and with `%s`. Each run gets a fresh target. Each run adds the location's "+
		"finalizer to every source object through the view before its copy (the deletion protocol, docs/mapper.md: one PATCH at "+
		"the source per object, see the source requests below); between the runs this benchmark takes the first run's "+
		"finalizers off the source objects again (not timed), so that both runs pay the protocol. "+
		"Time is from starting the mapper process (leader election and informer sync included) until watches on the target "+
		"(label `kcp.io/location=%s`) have seen every object ADDED. The original design estimated 1000 s for 50,000 objects at "+
		"client throttle, i.e. 50 objects/s.",
		BulkLocation, cms, want-cms, e.cfg.Namespaces, mapper.DefaultWorkers, strings.Join(TunedMapperArgs, " "), BulkLocation)
	finished := Check{Name: fmt.Sprintf("the mapper mapped every one of the %d objects of location %s onto the target within %s, in each run", want, BulkLocation, e.cfg.MapperTimeout)}
	for _, run := range []struct {
		name string
		r    mapperRun
	}{{"default flags", def}, {"throttle lifted", tuned}} {
		finished.Compared++
		if !run.r.complete || want == 0 {
			finished.Failures++
			finished.Detail += fmt.Sprintf("%s: %d of %d objects arrived. ", run.name, run.r.objects, want)
		}
	}
	s.Checks = append(s.Checks, finished)
	alt := "original design estimate (50 objects/s at client throttle)"
	for _, run := range []struct {
		name string
		r    mapperRun
	}{{"default flags", def}, {"throttle lifted", tuned}} {
		s.Comparisons = append(s.Comparisons,
			Comparison{Metric: "time to map " + fmt.Sprint(want) + " objects, " + run.name, Unit: "s", Ours: run.r.seconds, Alternative: alt, AltValue: float64(want) / designObjectsPerSecond, LowerIsBetter: true},
			Comparison{Metric: "throughput, " + run.name, Unit: "objects/s", Ours: run.r.rate, Alternative: alt, AltValue: designObjectsPerSecond},
		)
		s.Targets = append(s.Targets, atLeast("mapper initial sync ≥ 200 objects/s onto a real target, "+run.name, run.r.rate, 200, "%.0f objects/s"))
		all := run.r.mapperCPU + run.r.targetCPU + run.r.cpu["mapper-apiserver"] + run.r.cpu["kube-apiserver"] + run.r.cpu["etcd"] + run.r.cpu["bench"]
		s.Notes = append(s.Notes, fmt.Sprintf("%s (`mapper %s`): %d of %d objects in %.1f s, first object after %.2f s; CPU during the sync: mapper %.1f s, "+
			"the target kube-apiserver %.1f s, etcd (the source's and the target's) %.1f s, mapper-apiserver %.1f s, the source kube-apiserver %.1f s, "+
			"this benchmark %.1f s: %.1f of the %.1f CPU-seconds the machine's %d cores had (%.0f%%).",
			run.name, strings.Join(run.r.args[2:], " "), run.r.objects, want, run.r.seconds, run.r.first, run.r.mapperCPU,
			run.r.targetCPU, run.r.cpu["etcd"], run.r.cpu["mapper-apiserver"], run.r.cpu["kube-apiserver"], run.r.cpu["bench"],
			all, run.r.seconds*float64(goruntime.NumCPU()), goruntime.NumCPU(), 100*all/(run.r.seconds*float64(goruntime.NumCPU()))))
		s.Notes = append(s.Notes, fmt.Sprintf("%s: the source kube-apiserver's requests on ConfigMaps and Deployments during the sync "+
			"(apiserver_request_total): %s; it served %.0f watches when the sync started.", run.name, verbCounts(run.r.sourceRequests), run.r.sourceWatches))
		if !run.r.complete {
			s.Notes = append(s.Notes, fmt.Sprintf("**%s: only %d of %d objects arrived within %s.** Mapper log tail:\n\n```\n%s\n```", run.name, run.r.objects, want, e.cfg.MapperTimeout, run.r.logTail))
		}
		if run.r.reopened > 0 || run.r.listed > 0 {
			s.Notes = append(s.Notes, fmt.Sprintf("%s: the target ended %d of the counting watches early (kube-apiserver closes a watch whose consumer falls behind); "+
				"they resumed from their last resourceVersion, %d resources were counted by LIST instead.", run.name, run.r.reopened, run.r.listed))
		}
	}
	s.Seconds = time.Since(start).Seconds()
	return s
}

// mapperSync starts a target kube-apiserver and the mapper for the bulk location with extra
// flags, and measures until want objects are on the target. It stops both afterwards. With
// profile (and profiles enabled), it takes the mapper's CPU profile during the sync.
func (e *env) mapperSync(ctx context.Context, bin string, want int, extra []string, profile bool) mapperRun {
	e.logf("scenario 6: starting a target kube-apiserver")
	target := framework.StartControlPlane(e.tb, framework.ControlPlaneOptions{Name: "target", Etcd: e.source.Etcd})
	defer func() { _ = target.Stop() }()
	viewKubeconfig := e.source.Admin().KubeconfigFor(e.tb, e.viewURL(BulkLocation), e.mapper.ServingCA.CertPEM)
	metricsAddress := "0"
	profile = profile && e.cfg.Profiles
	if profile {
		port, err := framework.FreePort()
		if err != nil {
			e.tb.Fatal(err)
		}
		metricsAddress = fmt.Sprintf("127.0.0.1:%d", port)
	}
	args := append([]string{
		"--view-kubeconfig=" + viewKubeconfig,
		"--target-kubeconfig=" + target.AdminKubeconfig(),
		"--location=" + BulkLocation,
		"--metrics-bind-address=" + metricsAddress,
	}, extra...)
	if profile {
		args = append(args, "--profiling")
	}
	run := mapperRun{args: args}

	// Count the objects arriving on the target with watches opened before the mapper starts.
	tcfg := target.AdminConfig()
	tHTTP, err := sharedClient(tcfg)
	if err != nil {
		e.tb.Fatal(err)
	}
	counter := &arrivals{
		ctx: ctx, base: target.URL, selector: "kcp.io%2Flocation%3D" + BulkLocation,
		open: func(ctx context.Context, name, url string) (*watchStream, error) {
			c, tr, err := dedicatedClient(tcfg)
			if err != nil {
				return nil, err
			}
			return openWatch(ctx, name, c, tr, url)
		},
		list: func(ctx context.Context, url string) ([]byte, error) { return getBody(ctx, tHTTP, url) },
	}
	defer counter.stop()
	for _, path := range []string{"/api/v1/configmaps", "/apis/apps/v1/deployments"} {
		res, err := timedGet(ctx, tHTTP, target.URL+path+"?limit=1", true)
		if err != nil {
			e.tb.Fatal(err)
		}
		if err := counter.watch(path, listRV(e.tb, res.Body)); err != nil {
			e.tb.Fatal(err)
		}
	}

	e.logf("scenario 6: mapping %d objects of location %s (mapper %s)", want, BulkLocation, strings.Join(args[2:], " "))
	m0, err := scrapeFamilies(ctx, e.kaHTTP, e.source.URL+"/metrics")
	if err != nil {
		e.tb.Fatal(err)
	}
	run.sourceWatches = sumWhere(m0, "apiserver_longrunning_requests", "verb", "WATCH")
	cpu0 := e.cpu()
	target0, _ := sampleProc(target.APIServer.PID)
	t0 := time.Now()
	p := framework.StartProcess(e.tb, framework.ProcessSpec{Name: "mapper", Path: bin, Args: args})
	waitProfile := func() *Profile { return nil }
	if profile {
		// Over the time the sync takes at the target's 200 objects/s, from when the endpoint answers.
		mt := profileTarget{process: "mapper", base: "http://" + metricsAddress, client: http.DefaultClient}
		ready := waitHTTP(ctx, mt.base+"/healthz", 10*time.Second)
		secs := max(5, want/200-int(time.Since(t0).Seconds()))
		if ready {
			waitProfile = e.startCPUProfile(ctx, mt, "s6-sync-mapper", "scenario 6, initial sync with default flags", secs)
		}
	}
	deadline := time.Now().Add(e.cfg.MapperTimeout)
	var first time.Time
	for {
		run.objects, first = counter.count()
		if ps, err := sampleProc(p.PID); err == nil {
			run.mapperCPU = ps.CPU
		}
		if run.objects >= want || time.Now().After(deadline) || !p.Running() {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	run.seconds = time.Since(t0).Seconds()
	run.cpu = cpuDelta(cpu0, e.cpu())
	if target1, err := sampleProc(target.APIServer.PID); err == nil {
		run.targetCPU = target1.CPU - target0.CPU
	}
	if m1, err := scrapeFamilies(ctx, e.kaHTTP, e.source.URL+"/metrics"); err == nil {
		run.sourceRequests = map[string]float64{}
		for _, r := range requestRates(m0, m1, 1) {
			if r.resource == "configmaps" || r.resource == "deployments" {
				run.sourceRequests[r.verb] += r.perSecond
			}
		}
	}
	run.profile = waitProfile()
	run.complete = run.objects >= want
	run.rate = float64(run.objects) / run.seconds
	if !first.IsZero() {
		run.first = first.Sub(t0).Seconds()
	}
	if !run.complete {
		run.logTail = p.LogTail(20)
	}
	run.reopened, run.listed = counter.reopened()
	_ = p.Stop()
	e.logf("scenario 6: %d/%d objects in %.1fs (%.0f objects/s)", run.objects, want, run.seconds, run.rate)
	return run
}

// listRV returns a JSON list's metadata.resourceVersion.
func listRV(tb framework.TB, body []byte) uint64 {
	var rv uint64
	i := strings.Index(string(body), `"resourceVersion":"`)
	if i < 0 {
		tb.Fatalf("no resourceVersion in list: %.200s", body)
	}
	if _, err := fmt.Sscanf(string(body[i+len(`"resourceVersion":"`):]), "%d", &rv); err != nil {
		tb.Fatal(err)
	}
	return rv
}

// waitHTTP polls url until it answers 200, for at most timeout; it reports whether it did.
func waitHTTP(ctx context.Context, url string, timeout time.Duration) bool {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}) == nil
}

// sumWhere sums the samples of the metric family name whose label has value.
func sumWhere(fams map[string]*dto.MetricFamily, name, label, value string) float64 {
	total := 0.0
	for _, m := range fams[name].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label && lp.GetValue() == value {
				total += metricValue(m)
			}
		}
	}
	return total
}

// verbCounts formats request counts by verb, sorted by verb ("none" when there are none).
func verbCounts(m map[string]float64) string {
	verbs := make([]string, 0, len(m))
	for v := range m {
		verbs = append(verbs, v)
	}
	sort.Strings(verbs)
	var parts []string
	for _, v := range verbs {
		parts = append(parts, fmt.Sprintf("%s %.0f", v, m[v]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// releaseFinalizers takes location's finalizer off every source object of the data set
// assigned to location, as an administrator releases a location (docs/mapper.md), with one
// strategic merge patch per object ($deleteFromPrimitiveList: no other finalizer is touched)
// sent by cfg.LoadClients parallel clients.
func (e *env) releaseFinalizers(ctx context.Context, location string) {
	patch := []byte(fmt.Sprintf(`{"metadata":{"$deleteFromPrimitiveList/finalizers":[%q]}}`, contract.LocationFinalizer(location)))
	var objs []int
	for _, k := range []kind{kindConfigMap, kindDeployment} {
		objs = append(objs, e.ds.locationObjects(location, k)...)
	}
	start := time.Now()
	err := e.parallel(ctx, e.loadClients("bench-release"), len(objs), nil, func(c kubernetes.Interface, i int) error {
		o := e.ds.objects[objs[i]]
		var err error
		if o.kind == kindDeployment {
			_, err = c.AppsV1().Deployments(o.namespace).Patch(ctx, o.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		} else {
			_, err = c.CoreV1().ConfigMaps(o.namespace).Patch(ctx, o.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		}
		return err
	})
	if err != nil {
		e.tb.Fatalf("taking the finalizers of location %s off the source objects: %v", location, err)
	}
	e.logf("scenario 6: took location %s's finalizer off %d source objects in %.1fs", location, len(objs), time.Since(start).Seconds())
}
