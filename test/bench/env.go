package bench

import (
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// env is a running benchmark: the servers, the clients and the data set.
type env struct {
	tb      framework.TB
	cfg     Config
	ds      *dataset
	report  *Report
	profDir string

	source *framework.ControlPlane
	mapper *framework.MapperAPIServer

	// kube is a typed admin client of the source (writes), dyn a dynamic one (writes of
	// objects other than ConfigMaps); kaHTTP and maHTTP are shared raw clients of the source and
	// of mapper-apiserver (reads, measured).
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	kaHTTP *http.Client
	maHTTP *http.Client
}

// logf logs a progress line.
func (e *env) logf(format string, args ...any) { e.tb.Logf(format, args...) }

// pids returns the processes whose CPU and memory are measured, by role.
func (e *env) pids() map[string]int {
	m := map[string]int{"kube-apiserver": e.source.APIServer.PID, "etcd": e.source.Etcd.Process.PID, "bench": selfPID}
	if e.mapper != nil {
		m["mapper-apiserver"] = e.mapper.Process.PID
	}
	return m
}

// cpu returns the consumed CPU seconds of every measured process.
func (e *env) cpu() map[string]float64 {
	out := map[string]float64{}
	for role, pid := range e.pids() {
		s, err := sampleProc(pid)
		if err != nil {
			e.tb.Fatalf("reading /proc of %s (pid %d): %v", role, pid, err)
		}
		out[role] = s.CPU
	}
	return out
}

// cpuDelta returns b-a per role.
func cpuDelta(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range b {
		out[k] = v - a[k]
	}
	return out
}

// mapperConfig returns the admin's client config for mapper-apiserver.
func (e *env) mapperConfig() *rest.Config { return e.mapper.Config(e.source.Admin()) }

// viewURL returns the base URL of location's view.
func (e *env) viewURL(location string) string { return e.mapper.ViewURL(location) }

// setupClients creates the clients of the source.
func (e *env) setupSourceClients() {
	cfg := e.source.AdminConfig()
	cfg.QPS = -1
	var err error
	if e.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		e.tb.Fatal(err)
	}
	if e.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		e.tb.Fatal(err)
	}
	if e.kaHTTP, err = sharedClient(cfg); err != nil {
		e.tb.Fatal(err)
	}
}

// unthrottledSourceDynamic returns a dynamic client of the source as admin without a
// client-side rate limit (the scenarios that create thousands of control objects).
func (e *env) unthrottledSourceDynamic() dynamic.Interface {
	cfg := e.source.AdminConfig()
	cfg.QPS = -1
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		e.tb.Fatal(err)
	}
	return dyn
}

// setupMapperClients creates the clients of mapper-apiserver (again after a restart).
func (e *env) setupMapperClients() {
	var err error
	if e.maHTTP, err = sharedClient(e.mapperConfig()); err != nil {
		e.tb.Fatal(err)
	}
}

// LoadResult describes how the data set was loaded.
type LoadResult struct {
	Namespaces    int     `json:"namespaces"`
	ConfigMaps    int     `json:"configMaps"`
	Deployments   int     `json:"deployments"`
	Clients       int     `json:"clients"`
	Seconds       float64 `json:"seconds"`
	ObjectsPerSec float64 `json:"objectsPerSecond"`
	Retries       int64   `json:"retries"`
	// LocationObjects summarises the objects per regular location.
	LocationObjects stats `json:"locationObjects"`
	BulkObjects     int   `json:"bulkObjects"`
}

// loadClients returns cfg.LoadClients admin clients of the source without client-side
// throttling, each on its own connection, with user agents agent-<i>.
func (e *env) loadClients(agent string) []kubernetes.Interface {
	clients := make([]kubernetes.Interface, e.cfg.LoadClients)
	for i := range clients {
		cfg := e.source.AdminConfig()
		cfg.QPS = -1
		// A Proxy function makes client-go build a transport (a connection) for this client
		// alone instead of sharing the cached one; loopback is never proxied.
		cfg.Proxy = http.ProxyFromEnvironment
		cfg.UserAgent = fmt.Sprintf("%s-%d", agent, i)
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			e.tb.Fatal(err)
		}
		clients[i] = c
	}
	return clients
}

// parallel calls do(c, i) for i in [0, n), spread over clients (one goroutine each), trying
// each i up to 5 times with a growing pause (an AlreadyExists error counts as done; retries,
// when not nil, counts the attempts made again). It returns the first error that remained.
func (e *env) parallel(ctx context.Context, clients []kubernetes.Interface, n int, retries *atomic.Int64, do func(c kubernetes.Interface, i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for w := range clients {
		wg.Add(1)
		go func(c kubernetes.Interface) {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					if err = do(c, i); err == nil || apierrors.IsAlreadyExists(err) {
						err = nil
						break
					}
					if retries != nil {
						retries.Add(1)
					}
					time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		}(clients[w])
	}
	wg.Wait()
	return firstErr
}

// load creates the namespaces and objects with cfg.LoadClients parallel clients, each on its
// own connection.
func (e *env) load(ctx context.Context) LoadResult {
	res := LoadResult{Clients: e.cfg.LoadClients, Namespaces: len(e.ds.namespaces)}
	clients := e.loadClients("bench-loader")
	var retries atomic.Int64
	run := func(n int, do func(c kubernetes.Interface, i int) error) error {
		return e.parallel(ctx, clients, n, &retries, do)
	}
	start := time.Now()
	err := run(len(e.ds.namespaces), func(c kubernetes.Interface, i int) error {
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ds.namespaces[i]}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		e.tb.Fatalf("creating namespaces: %v", err)
	}
	objStart := time.Now()
	var done atomic.Int64
	stopProgress := e.progress("loaded", &done, len(e.ds.objects))
	err = run(len(e.ds.objects), func(c kubernetes.Interface, i int) error {
		var err error
		if e.ds.objects[i].kind == kindDeployment {
			_, err = c.AppsV1().Deployments(e.ds.objects[i].namespace).Create(ctx, e.ds.deployment(i), metav1.CreateOptions{})
		} else {
			_, err = c.CoreV1().ConfigMaps(e.ds.objects[i].namespace).Create(ctx, e.ds.configMap(i), metav1.CreateOptions{})
		}
		if err == nil {
			done.Add(1)
		}
		return err
	})
	stopProgress()
	if err != nil {
		e.tb.Fatalf("creating objects: %v", err)
	}
	objSecs := time.Since(objStart).Seconds()
	res.Seconds = time.Since(start).Seconds()
	res.ObjectsPerSec = float64(len(e.ds.objects)) / objSecs
	res.Retries = retries.Load()
	for _, o := range e.ds.objects {
		if o.kind == kindDeployment {
			res.Deployments++
		} else {
			res.ConfigMaps++
		}
	}
	counts := map[string]int{}
	for _, o := range e.ds.objects {
		for _, l := range o.locs {
			counts[l]++
		}
	}
	var perLoc []float64
	for _, l := range e.ds.locations {
		perLoc = append(perLoc, float64(counts[l]))
	}
	res.LocationObjects = summarize(perLoc)
	res.BulkObjects = counts[BulkLocation]
	return res
}

// progress logs done/total every 10 seconds until the returned function is called.
func (e *env) progress(what string, done *atomic.Int64, total int) func() {
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				e.logf("  %s %d/%d", what, done.Load(), total)
			}
		}
	}()
	return func() { close(stop) }
}

// writeRecord is one acknowledged source write.
type writeRecord struct {
	idx int
	// resource is the written object's resource (benchResource.name).
	resource string
	rv       uint64
	start    time.Time
	ack      time.Time
	oldLocs  []string
	newLocs  []string
}

// writeJob is one planned write.
type writeJob struct {
	idx    int
	assign bool
}

// writePlan picks the next write.
type writePlan func(r *rand.Rand) writeJob

// randomWrites picks a random ConfigMap of the data set; assignPercent of the writes change
// its assignment, the others its data.
func (e *env) randomWrites(assignPercent int) writePlan {
	return func(r *rand.Rand) writeJob {
		return writeJob{idx: e.ds.configMaps[r.Intn(len(e.ds.configMaps))], assign: r.Intn(100) < assignPercent}
	}
}

// cyclicWrites changes the data of the given objects in turn.
func cyclicWrites(idxs []int) writePlan {
	var n int
	return func(*rand.Rand) writeJob {
		j := writeJob{idx: idxs[n%len(idxs)]}
		n++
		return j
	}
}

// writeResult is the outcome of a write phase.
type writeResult struct {
	records  []writeRecord
	planned  int
	seconds  float64
	failures int
	// latency of the writes themselves (request to response), ms.
	latency stats
}

// writers is the number of concurrent writers; an object is always written by the same one.
const writers = 8

// runWrites writes at cfg.WriteRate for d, following plan. Writes are spread over 8 writers by
// object so that one object is never written concurrently; a slow write does not delay the
// schedule of the others.
func (e *env) runWrites(ctx context.Context, d time.Duration, seed int64, plan writePlan) writeResult {
	r := rand.New(rand.NewSource(seed))
	var chans [writers]chan writeJob
	var mu sync.Mutex
	var res writeResult
	var wg sync.WaitGroup
	for w := range chans {
		chans[w] = make(chan writeJob, 10_000)
		wg.Add(1)
		go func(in chan writeJob) {
			defer wg.Done()
			wr := rand.New(rand.NewSource(seed + int64(w) + 1))
			for job := range in {
				rec, err := e.write(ctx, wr, job)
				mu.Lock()
				if err != nil {
					res.failures++
					if res.failures <= 3 {
						e.logf("  write failed: %v", err)
					}
				} else {
					res.records = append(res.records, rec)
				}
				mu.Unlock()
			}
		}(chans[w])
	}
	// Writes are due at start + i/rate; a tick that comes late catches up with every write that
	// is due, so the rate holds on a busy machine.
	total := int(d.Seconds() * e.cfg.WriteRate)
	start := time.Now()
	t := time.NewTicker(time.Duration(float64(time.Second) / e.cfg.WriteRate))
loop:
	for res.planned < total {
		select {
		case <-ctx.Done():
			break loop
		case <-t.C:
		}
		due := min(total, int(time.Since(start).Seconds()*e.cfg.WriteRate)+1)
		for ; res.planned < due; res.planned++ {
			job := plan(r)
			chans[job.idx%writers] <- job
		}
	}
	t.Stop()
	for _, c := range chans {
		close(c)
	}
	wg.Wait()
	res.seconds = time.Since(start).Seconds()
	var lat []float64
	for _, rec := range res.records {
		lat = append(lat, ms(rec.ack.Sub(rec.start)))
	}
	res.latency = summarize(lat)
	return res
}

// write performs one write job on the source: a data change (a new "rev": a ConfigMap's
// data.rev, any other object's annotation RevAnnotation) or a new assignment (annotation and
// location labels together, so that views and label selectors see the same). Objects in the
// bulk location stay in it.
func (e *env) write(ctx context.Context, r *rand.Rand, job writeJob) (writeRecord, error) {
	o := e.ds.objects[job.idx]
	res := resourceOf(o.kind)
	rec := writeRecord{idx: job.idx, resource: res.name, oldLocs: o.locs, newLocs: o.locs}
	var patch string
	if job.assign {
		// A new assignment that differs from the old one (a no-op patch makes no event).
		var newLocs []string
		for attempt := 0; attempt < 100; attempt++ {
			newLocs = e.ds.randomLocations(r)
			if hasString(o.locs, BulkLocation) {
				newLocs = sortedUnique(append(newLocs, BulkLocation))
			}
			if !equalStrings(newLocs, o.locs) {
				break
			}
		}
		labels := map[string]*string{}
		for _, l := range o.locs {
			labels[LocationLabel(l)] = nil
		}
		empty := ""
		for _, l := range newLocs {
			labels[LocationLabel(l)] = &empty
		}
		var lb strings.Builder
		first := true
		for k, v := range labels {
			if !first {
				lb.WriteByte(',')
			}
			first = false
			if v == nil {
				fmt.Fprintf(&lb, "%q:null", k)
			} else {
				fmt.Fprintf(&lb, "%q:%q", k, *v)
			}
		}
		patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:%q},"labels":{%s}}}`, contract.AssignedLocationsAnnotation, assignment(newLocs), lb.String())
		rec.newLocs = newLocs
	} else if o.kind == kindConfigMap {
		patch = fmt.Sprintf(`{"data":{"rev":"%d"}}`, o.rev+1)
	} else {
		patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, RevAnnotation, o.rev+1)
	}
	var rv string
	rec.start = time.Now()
	if o.kind == kindConfigMap {
		cm, err := e.kube.CoreV1().ConfigMaps(o.namespace).Patch(ctx, o.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		rec.ack = time.Now()
		if err != nil {
			return rec, err
		}
		rv = cm.ResourceVersion
	} else {
		u, err := e.dyn.Resource(res.gvr).Namespace(o.namespace).Patch(ctx, o.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		rec.ack = time.Now()
		if err != nil {
			return rec, err
		}
		rv = u.GetResourceVersion()
	}
	var err error
	rec.rv, err = strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return rec, err
	}
	if job.assign {
		o.locs = rec.newLocs
	} else {
		o.rev++
	}
	return rec, nil
}

// expectedDeliveries counts the events the writes must produce for watchers, given how many
// watchers watch each resource on each location (by watchKey): one per watcher of the written
// resource on every location in the old or new assignment.
func expectedDeliveries(records []writeRecord, watchers map[string]int) int {
	n := 0
	for _, rec := range records {
		for _, l := range union(rec.oldLocs, rec.newLocs) {
			n += watchers[watchKey(rec.resource, l)]
		}
	}
	return n
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// union returns the sorted union of two sorted lists.
func union(a, b []string) []string {
	return sortedUnique(append(append([]string(nil), a...), b...))
}
