package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// Size of the randomized leak test.
const (
	leakLocations = 20
	leakObjects   = 2000
	leakChanges   = 500
	// leakWriters write concurrently; each object is written by one writer only, so its versions
	// are recorded in order.
	leakWriters = 8
	// leakMalformedPercent of the assignments written are an annotation that does not parse
	// (assigned to no location).
	leakMalformedPercent = 3
	// leakChangePause spaces each writer's assignment changes, so that the changes span several
	// of the kube-apiserver's request timeouts (leakRequestTimeout): it cuts watches through the
	// aggregator after that time (it sees a view watch as a GET, not as a long-running request),
	// and the watchers resume from their last resourceVersion while changes keep coming.
	leakChangePause    = 300 * time.Millisecond
	leakRequestTimeout = "5s"
)

// version is one version of a source object as its writer recorded it: the resourceVersion the
// write returned and the locations the object was assigned to in that version.
type version struct {
	rv        uint64
	locations sets.Set[string]
}

// writeLog is the ground truth of the leak test: every version of every object, per key
// "namespace/name", in resourceVersion order.
type writeLog struct {
	mu       sync.Mutex
	versions map[string][]version
}

func (l *writeLog) record(key string, rv string, locations []string) error {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return fmt.Errorf("%s: resourceVersion %q: %v", key, rv, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.versions[key] = append(l.versions[key], version{rv: n, locations: sets.New(locations...)})
	return nil
}

// at returns the version of key written at rv, and the one before it (rv of 0 when none).
func (l *writeLog) at(key string, rv uint64) (this, before version, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, v := range l.versions[key] {
		if v.rv == rv {
			if i > 0 {
				before = l.versions[key][i-1]
			}
			return v, before, true
		}
	}
	return version{}, version{}, false
}

// assigned returns the keys whose latest version is assigned to location.
func (l *writeLog) assigned(location string) sets.Set[string] {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := sets.New[string]()
	for k, vs := range l.versions {
		if vs[len(vs)-1].locations.Has(location) {
			out.Insert(k)
		}
	}
	return out
}

// seenEvent is what a watcher received: the event type ("LIST" for an item of its initial list),
// the object's key and resourceVersion, and the locations its annotation names.
type seenEvent struct {
	typ      string
	key      string
	rv       uint64
	assigned sets.Set[string]
}

// leakWatcher lists and then watches the configmaps of one location's view with an identity that
// may read only that location, recording every event.
type leakWatcher struct {
	location, route string
	client          dynamic.NamespaceableResourceInterface

	mu      sync.Mutex
	events  []seenEvent
	present sets.Set[string]
	// immediate collects violations found when the event arrived: an object whose own
	// annotation does not name the location.
	immediate []string
	// watches counts the watch requests (the first one and every re-watch).
	watches atomic.Int64
	err     error
	// lastRV is the resourceVersion of the last version seen per key.
	lastRV map[string]uint64
	// scanner greps every byte this watcher's client receives.
	scanner *leakScanner
}

// seen returns the resourceVersion of the last version of key the watcher received.
func (w *leakWatcher) seen(key string) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastRV[key]
}

// sawVersion reports whether the watcher received an event of key at resourceVersion rv.
func (w *leakWatcher) sawVersion(key string, rv uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.events {
		if e.key == key && e.rv == rv {
			return true
		}
	}
	return false
}

func (w *leakWatcher) observe(typ string, obj *unstructured.Unstructured) {
	key := obj.GetNamespace() + "/" + obj.GetName()
	rv, _ := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	assigned := annotationLocations(obj)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, seenEvent{typ: typ, key: key, rv: rv, assigned: assigned})
	w.lastRV[key] = max(w.lastRV[key], rv)
	if !assigned.Equal(sets.New(w.location)) {
		w.immediate = append(w.immediate, fmt.Sprintf("%s %s at rv %d names %v", typ, key, rv, sets.List(assigned)))
	}
	if typ == string(watch.Deleted) {
		w.present.Delete(key)
	} else {
		w.present.Insert(key)
	}
}

// run lists and watches until ctx ends; a RetryWatcher re-establishes watches that the server or
// the aggregator closes, from the last resourceVersion seen.
func (w *leakWatcher) run(ctx context.Context, started chan<- struct{}) {
	list, err := w.client.List(ctx, metav1.ListOptions{})
	if err != nil {
		w.fail(fmt.Errorf("initial list: %w", err))
		close(started)
		return
	}
	for i := range list.Items {
		w.observe("LIST", &list.Items[i])
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w.watches.Add(1)
			return w.client.Watch(ctx, opts)
		},
	})
	close(started)
	if err != nil {
		w.fail(err)
		return
	}
	defer rw.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-rw.ResultChan():
			if !ok {
				if ctx.Err() == nil {
					w.fail(fmt.Errorf("the watch ended"))
				}
				return
			}
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				w.observe(string(ev.Type), ev.Object.(*unstructured.Unstructured))
			case watch.Bookmark:
			case watch.Error:
				w.fail(fmt.Errorf("watch error: %v", apierrors.FromObject(ev.Object)))
				return
			}
		}
	}
}

func (w *leakWatcher) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

// annotationLocations parses the object's assignment annotation; a value that does not parse is
// no location (docs/design.md, "Names").
func annotationLocations(obj *unstructured.Unstructured) sets.Set[string] {
	var locs []string
	if err := json.Unmarshal([]byte(obj.GetAnnotations()[assignedAnnotation]), &locs); err != nil {
		return sets.New[string]()
	}
	return sets.New(locs...)
}

// TestLocationLeak: 20 locations, 2,000 objects, 500
// random assignment changes, while one watcher per location (with only its own permission,
// half through the aggregator and half straight to mapper-apiserver) lists and watches its
// view. No watcher may ever receive an object that was not assigned to its location at the
// resourceVersion it carries (for a DELETED, the version it replaced), and at the end every
// watcher holds exactly its location's objects.
func TestLocationLeak(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	source := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source", ExtraArgs: []string{"--request-timeout=" + leakRequestTimeout}})
	admin := source.Admin().Client(t)
	srcConfig := source.AdminConfig()
	srcConfig.QPS = -1
	src, err := dynamic.NewForConfig(srcConfig)
	if err != nil {
		t.Fatal(err)
	}
	nss := []string{"leak-a", "leak-b", "leak-c", "leak-d"}
	for _, ns := range nss {
		ensureNamespace(t, ctx, src, ns)
	}
	locations := make([]string, leakLocations)
	users := make([]*framework.User, leakLocations)
	for i := range locations {
		locations[i] = fmt.Sprintf("loc-%02d", i)
		users[i] = source.NewUser(t, "mapper-"+locations[i])
		grant(t, ctx, admin, "mapper-"+locations[i], []rbacv1.PolicyRule{viewRule(locations[i], "get", "watch", "update", "patch")}, userSubject(users[i].Name))
	}
	for i := range locations {
		waitForRBAC(t, ctx, admin, identity{user: users[i].Name}, "watch", locations[i], true)
		// Only its own location: the neighbour's view is denied.
		waitForRBAC(t, ctx, admin, identity{user: users[i].Name}, "get", locations[(i+1)%leakLocations], false)
	}

	api := framework.StartAggregatedMapperAPIServer(t, source, "--resources=configmaps", "--watch-history-size=20000")

	r := rand.New(rand.NewSource(4))
	assignment := func() ([]string, bool) {
		if r.Intn(100) < leakMalformedPercent {
			return nil, true
		}
		var out []string
		for _, l := range locations {
			if r.Intn(10) == 0 {
				out = append(out, l)
			}
		}
		return out, false
	}
	type write struct {
		obj       int
		locations []string
		malformed bool
	}
	creates := make([]write, leakObjects)
	for i := range creates {
		locs, bad := assignment()
		creates[i] = write{obj: i, locations: locs, malformed: bad}
	}
	changes := make([]write, leakChanges)
	for i := range changes {
		locs, bad := assignment()
		changes[i] = write{obj: r.Intn(leakObjects), locations: locs, malformed: bad}
	}

	log := &writeLog{versions: map[string][]version{}}
	objects := make([]*unstructured.Unstructured, leakObjects)
	apply := func(ctx context.Context, w write) error {
		ns, name := nss[w.obj%len(nss)], fmt.Sprintf("cm-%04d", w.obj)
		obj := objects[w.obj]
		if obj == nil {
			obj = newConfigMap(ns, name)
		}
		if w.malformed {
			setMalformed(obj, `["`+locations[0]+`"`) // truncated JSON
		} else {
			setAssignment(obj, w.locations...)
		}
		var out *unstructured.Unstructured
		var err error
		if objects[w.obj] == nil {
			out, err = src.Resource(configMapsGVR).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
		} else {
			out, err = src.Resource(configMapsGVR).Namespace(ns).Update(ctx, obj, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("writing %s/%s: %w", ns, name, err)
		}
		objects[w.obj] = out
		if w.malformed {
			return log.record(ns+"/"+name, out.GetResourceVersion(), nil)
		}
		return log.record(ns+"/"+name, out.GetResourceVersion(), w.locations)
	}
	// runWrites applies writes with leakWriters workers; writes of one object go to one worker,
	// in order.
	runWrites := func(writes []write, pause time.Duration) {
		t.Helper()
		queues := make([][]write, leakWriters)
		for _, w := range writes {
			queues[w.obj%leakWriters] = append(queues[w.obj%leakWriters], w)
		}
		errs := make(chan error, leakWriters)
		for _, q := range queues {
			go func() {
				for _, w := range q {
					if err := apply(ctx, w); err != nil {
						errs <- err
						return
					}
					time.Sleep(pause)
				}
				errs <- nil
			}()
		}
		for range queues {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}

	// Half of the objects exist before the watchers start (their initial lists), the rest and
	// all changes happen while they watch.
	start := time.Now()
	runWrites(creates[:leakObjects/2], 0)
	watchers := make([]*leakWatcher, leakLocations)
	wctx, stopWatchers := context.WithCancel(ctx)
	defer stopWatchers()
	var wg sync.WaitGroup
	for i, loc := range locations {
		var cfg *rest.Config
		w := &leakWatcher{location: loc, present: sets.New[string](), lastRV: map[string]uint64{}}
		if i%2 == 0 {
			w.route, cfg = "aggregated", api.ViewConfig(users[i], loc)
		} else {
			w.route, cfg = "direct", api.Server.ViewConfig(users[i], loc)
		}
		var needles []string
		for _, other := range locations {
			if other != loc {
				needles = append(needles, other, statusMarker(other))
			}
		}
		w.scanner = newLeakScanner(loc+"/"+w.route, locationLabelPrefix, needles...)
		cfg.Wrap(w.scanner.wrap)
		d, err := dynamic.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w.client = d.Resource(configMapsGVR)
		watchers[i] = w
		started := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(wctx, started)
		}()
		<-started
	}
	runWrites(creates[leakObjects/2:], 0)
	runWrites(changes, leakChangePause)
	t.Logf("wrote %d objects and %d assignment changes in %v", leakObjects, leakChanges, time.Since(start).Round(time.Millisecond))
	statusPhase(t, ctx, source, src, watchers, log, objects)

	// Converge: every watcher holds exactly its location's objects (from the writers' log, and
	// from kube-apiserver's label-selector list of the twin labels).
	for _, w := range watchers {
		want := log.assigned(w.location)
		if truth := groundTruth(t, ctx, src, configMapsGVR, w.location, ""); !truth.Equal(want) {
			t.Fatalf("the source's label-selector list of %s disagrees with the writers' log: %s", w.location, diff(want, truth))
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.err != nil || w.present.Equal(want), nil
		})
		w.mu.Lock()
		if w.err != nil {
			t.Errorf("watcher of %s (%s): %v", w.location, w.route, w.err)
		} else if err != nil {
			t.Errorf("watcher of %s (%s) does not converge to its location's objects: %s", w.location, w.route, diff(want, w.present))
		}
		w.mu.Unlock()
	}
	stopWatchers()
	wg.Wait()
	var scanned int64
	for _, w := range watchers {
		scanned += w.scanner.scanned.Load()
		for _, f := range w.scanner.findings() {
			t.Errorf("raw bytes of a view name another location: %s", f)
		}
	}
	t.Logf("raw bytes of view responses and watch frames scanned for other locations: %d", scanned)
	if scanned == 0 {
		t.Error("no response byte was scanned: the scanner is not in the clients' transport")
	}

	// Every event any watcher received, checked against the writers' log.
	counts := map[string]int{}
	checked, violations := 0, []string{}
	var perWatcher []string
	totalWatches := int64(0)
	for _, w := range watchers {
		violations = append(violations, prefixAll(w.location+": ", w.immediate)...)
		for _, ev := range w.events {
			counts[ev.typ]++
			checked++
			this, before, ok := log.at(ev.key, ev.rv)
			switch {
			case !ok:
				violations = append(violations, fmt.Sprintf("%s: %s %s at rv %d: no write produced that version", w.location, ev.typ, ev.key, ev.rv))
			case ev.typ == string(watch.Deleted):
				// The object stopped being assigned at rv: the watcher may only learn about the
				// version it had, which must have been assigned to it.
				if !before.locations.Has(w.location) {
					violations = append(violations, fmt.Sprintf("%s: DELETED %s at rv %d, but the version before (rv %d) was assigned to %v", w.location, ev.key, ev.rv, before.rv, sets.List(before.locations)))
				}
				if !ev.assigned.Equal(sets.New(w.location)) {
					violations = append(violations, fmt.Sprintf("%s: DELETED %s at rv %d carries the assignment %v, not just this location", w.location, ev.key, ev.rv, sets.List(ev.assigned)))
				}
			default:
				if !this.locations.Has(w.location) {
					violations = append(violations, fmt.Sprintf("%s: %s %s at rv %d, which is assigned to %v", w.location, ev.typ, ev.key, ev.rv, sets.List(this.locations)))
				}
				if !ev.assigned.Equal(sets.New(w.location)) {
					violations = append(violations, fmt.Sprintf("%s: %s %s at rv %d carries the assignment %v, not just this location (the write had %v)", w.location, ev.typ, ev.key, ev.rv, sets.List(ev.assigned), sets.List(this.locations)))
				}
			}
		}
		totalWatches += w.watches.Load()
		perWatcher = append(perWatcher, fmt.Sprintf("%s/%s=%d", w.location, w.route, len(w.events)))
	}
	sort.Strings(perWatcher)
	t.Logf("%d locations, %d objects, %d assignment changes (%d%% malformed), %d watchers (%d watch requests incl. re-watches)",
		leakLocations, leakObjects, leakChanges, leakMalformedPercent, len(watchers), totalWatches)
	t.Logf("events checked: %d (initial list items %d, ADDED %d, MODIFIED %d, DELETED %d); violations: %d",
		checked, counts["LIST"], counts[string(watch.Added)], counts[string(watch.Modified)], counts[string(watch.Deleted)], len(violations))
	t.Logf("events per watcher: %s", strings.Join(perWatcher, " "))
	for _, typ := range []string{"LIST", string(watch.Added), string(watch.Modified), string(watch.Deleted)} {
		if counts[typ] == 0 {
			t.Errorf("no %s event at all: the test did not exercise that path", typ)
		}
	}
	if len(violations) > 0 {
		t.Errorf("%d events leaked or misrepresented an assignment; first ones:\n%s", len(violations), strings.Join(head(violations), "\n"))
	}
}

func prefixAll(prefix string, s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = prefix + x
	}
	return out
}

// statusMarker is a token in location's status records: no byte of it may appear in another
// location's view.
func statusMarker(location string) string {
	return "rec0rd-" + strings.ReplaceAll(location, "-", "") + "-z9"
}

// leakStatusObjects is how many objects the status phase of TestLocationLeak works on.
const leakStatusObjects = 24

// statusPhase gives leakStatusObjects objects several locations, status write-back and a
// kcp.io/status-location, lets each assigned location write a status record holding its
// statusMarker through its view (so managedFields name every writer's record), then makes a
// kubectl apply round trip of each source object (so last-applied-configuration holds every
// record). It waits until every assigned watcher received the final version; the watchers'
// scanners then show whether any byte of another location reached them.
func statusPhase(t *testing.T, ctx context.Context, source *framework.ControlPlane, src dynamic.Interface, watchers []*leakWatcher, log *writeLog, objects []*unstructured.Unstructured) {
	t.Helper()
	byLoc := map[string]*leakWatcher{}
	for _, w := range watchers {
		byLoc[w.location] = w
	}
	type target struct {
		ns, name  string
		locations []string
	}
	var targets []target
	for i := 0; i < leakStatusObjects; i++ {
		obj := objects[i].DeepCopy()
		locs := []string{watchers[i%len(watchers)].location, watchers[(i+3)%len(watchers)].location, watchers[(i+7)%len(watchers)].location}
		sort.Strings(locs)
		setAssignment(obj, locs...)
		ann := obj.GetAnnotations()
		ann["kcp.io/status-policy"] = "Reflect"
		ann["kcp.io/status-location"] = locs[i%len(locs)]
		obj.SetAnnotations(ann)
		out, err := src.Resource(configMapsGVR).Namespace(obj.GetNamespace()).Update(ctx, obj, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("status phase: %v", err)
		}
		if err := log.record(out.GetNamespace()+"/"+out.GetName(), out.GetResourceVersion(), locs); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, target{ns: out.GetNamespace(), name: out.GetName(), locations: locs})
	}
	// Every assigned location writes its record through its own view, concurrently.
	var wg sync.WaitGroup
	errs := make(chan error, len(targets)*3)
	for _, tg := range targets {
		for _, loc := range tg.locations {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := byLoc[loc].client.Namespace(tg.ns)
				for attempt := 0; ; attempt++ {
					cur, err := c.Get(ctx, tg.name, metav1.GetOptions{})
					if err == nil {
						cur.Object["status"] = map[string]interface{}{"marker": statusMarker(loc), "ready": true}
						var out *unstructured.Unstructured
						out, err = c.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
						if err == nil {
							errs <- log.record(tg.ns+"/"+tg.name, out.GetResourceVersion(), tg.locations)
							return
						}
					}
					if !apierrors.IsConflict(err) || attempt > 50 {
						errs <- fmt.Errorf("status write of %s on %s/%s: %w", loc, tg.ns, tg.name, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// A kubectl apply round trip of each source object: last-applied-configuration then holds
	// all of its annotations, every location's record included.
	finalRV := map[string]uint64{}
	for _, tg := range targets {
		yaml, err := framework.RunKubectl(t, source.AdminKubeconfig(), "get", "configmap", "-n", tg.ns, tg.name, "-o", "yaml")
		if err != nil {
			t.Fatalf("kubectl get: %v: %s", err, yaml)
		}
		if !strings.Contains(yaml, statusMarker(tg.locations[0])) {
			t.Fatalf("the source object %s/%s holds no status record of %s:\n%s", tg.ns, tg.name, tg.locations[0], yaml)
		}
		file := t.TempDir() + "/obj.yaml"
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := framework.RunKubectl(t, source.AdminKubeconfig(), "apply", "-f", file, "-o", "jsonpath={.metadata.resourceVersion}")
		if err != nil {
			t.Fatalf("kubectl apply: %v: %s", err, out)
		}
		key := tg.ns + "/" + tg.name
		if err := log.record(key, strings.TrimSpace(out), tg.locations); err != nil {
			t.Fatal(err)
		}
		finalRV[key], _ = strconv.ParseUint(strings.TrimSpace(out), 10, 64)
		// One GET per assigned view, through the scanning clients too.
		for _, loc := range tg.locations {
			if _, err := byLoc[loc].client.Namespace(tg.ns).Get(ctx, tg.name, metav1.GetOptions{}); err != nil {
				t.Fatalf("GET %s through the view of %s: %v", key, loc, err)
			}
		}
	}
	// The round trip changes nothing a view shows (last-applied-configuration is hidden), so it
	// is no event in any view. A label every view shows, written after it,
	// is: once a watcher received that, it received (and scanned) anything the round trip
	// could have sent it.
	for _, tg := range targets {
		key := tg.ns + "/" + tg.name
		cur, err := src.Resource(configMapsGVR).Namespace(tg.ns).Get(ctx, tg.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		labels := cur.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["e2e.kcp.io/round-trip"] = "done"
		cur.SetLabels(labels)
		out, err := src.Resource(configMapsGVR).Namespace(tg.ns).Update(ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := log.record(key, out.GetResourceVersion(), tg.locations); err != nil {
			t.Fatal(err)
		}
		labelRV, _ := strconv.ParseUint(out.GetResourceVersion(), 10, 64)
		for _, loc := range tg.locations {
			w := byLoc[loc]
			if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
				return w.seen(key) >= labelRV, nil
			}); err != nil {
				t.Fatalf("the watcher of %s did not receive %s at rv %d after the kubectl apply round trip (last seen %d)", loc, key, labelRV, w.seen(key))
			}
			if w.sawVersion(key, finalRV[key]) {
				t.Errorf("the watcher of %s received an event for the kubectl apply round trip of %s (rv %d), which changes nothing its view shows", loc, key, finalRV[key])
			}
		}
	}
	t.Logf("status phase: %d objects, %d status writes through views, %d kubectl apply round trips", len(targets), len(targets)*3, len(targets))
}
