package cache

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
)

// TestConsistencyUnderConcurrency drives random ingest (adds, updates with re-assignment and
// label changes, status records that bump the generation as a Deployment's do, malformed
// annotations, deletes, relists, source bookmarks) while clients list, watch, get resumed,
// get closed as too slow and re-watch. Every client checks the watch protocol (ADDED only for
// unknown objects, MODIFIED/DELETED only for known ones, RVs never going backwards) and, at
// the end, that the state it built equals List. Every object a list, a page or an ADDED or
// MODIFIED event shows is recorded by location, key and resourceVersion: one resourceVersion
// must always show one content (docs/views.md, "Restarts and replicas"), also in a second
// store that lists the final state afresh, as a restarted server does. Run with -race.
func TestConsistencyUnderConcurrency(t *testing.T) {
	testConsistency(t, nil)
}

// TestConsistencyWithDeferredRenderings is TestConsistencyUnderConcurrency with a Customization
// that renders the objects of one of the two namespaces, deferred to a running Renderer (a
// re-rendering event interleaves with the source's events at any time), and the rules
// changed now and then (deferred re-renderings of every customized object). Half the clients
// select by a label that versions change while their rendering is pending: a selector matches
// what the view shows (Object.selectable), so an object enters or leaves a selection when its
// rendering does. The protocol is the same, except that a watch resumed from a resourceVersion
// replays a re-rendering at exactly that resourceVersion (docs/views.md, "Customizations and
// resourceVersions"): an ADDED of a known object at that resourceVersion, or a DELETED of an
// unknown one, is accepted as that replay.
func TestConsistencyWithDeferredRenderings(t *testing.T) {
	r := NewRenderer(RendererOptions{Workers: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)
	testConsistency(t, r)
}

// annotationRule is a Customization ns0/annotate that sets annotation "shown-in" of every
// ConfigMap of ns0 to the location's name, with suffix.
func annotationRule(suffix string) *controlv1alpha1.Customization {
	return &controlv1alpha1.Customization{
		ObjectMeta: metav1.ObjectMeta{Name: "annotate", Namespace: "ns0", Generation: 1},
		Spec: controlv1alpha1.CustomizationSpec{
			Resources: []controlv1alpha1.ResourceRule{{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}},
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "add", path: "/metadata/annotations/shown-in", value: location.metadata.name + "` + suffix + `"}]`}}},
		},
	}
}

// testConsistency is TestConsistencyUnderConcurrency, with renderer (nil: none) making the
// renderings of a Customization of ns0.
func testConsistency(t *testing.T, renderer *Renderer) {
	s := newTestStore(t, StoreOptions{HistorySize: 300, WatcherBufferSize: 20, BookmarkInterval: 5 * time.Millisecond, Renderer: renderer})
	locations := []string{"l0", "l1", "l2", "l3"}
	rng := rand.New(rand.NewSource(1))
	var setRules func(step int)
	var rules Rules // the rules in force, for the restarted store
	if renderer != nil {
		c := customization.NewCompiler(customization.Options{PlainCluster: "root"})
		snapshots := make([]Rules, 2)
		for i, suffix := range []string{"", "-again"} {
			snap, errs := c.Snapshot(uint64(i+1), []*controlv1alpha1.Customization{annotationRule(suffix)}, nil)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			snapshots[i] = snap
		}
		setRules = func(step int) {
			rules = snapshots[step%2]
			s.SetRules(rules, 0)
		}
		setRules(0)
	}
	mustReplace(t, s, 1)
	shown := newShownContents()
	generations := map[string]int64{} // name → generation of its last version

	randomObj := func(rv uint64) *unstructured.Unstructured {
		var ls []string
		for _, l := range locations {
			if rng.Intn(3) == 0 {
				ls = append(ls, l)
			}
		}
		cluster := []string{"root", "c1"}[rng.Intn(2)]
		extra := []string{"a:kcp.io/cluster=" + cluster, "l:app=" + []string{"x", "y"}[rng.Intn(2)]}
		if rng.Intn(20) == 0 {
			extra = append(extra, "a:kcp.io/assigned-locations=[bad")
			ls = nil
		}
		if rng.Intn(2) == 0 {
			// Status records of some locations: each location's record is its own .status,
			// hidden from the others.
			extra = append(extra, "a:"+contract.StatusPolicyAnnotation+"="+contract.StatusPolicyReflect)
			for _, l := range locations {
				if rng.Intn(2) == 0 {
					extra = append(extra, fmt.Sprintf("a:%s%s={\"n\":%d}", contract.StatusRecordAnnotationPrefix, l, rng.Intn(3)))
				}
			}
		}
		for _, l := range locations {
			if rng.Intn(4) == 0 {
				// An apply outcome record: shown in its location's view only.
				extra = append(extra, fmt.Sprintf("a:%s%s={\"reason\":\"Conflict\",\"observedGeneration\":%d}", contract.OutcomeAnnotationPrefix, l, rng.Intn(3)))
			}
		}
		u := cm(fmt.Sprintf("ns%d", rng.Intn(2)), fmt.Sprintf("o%d", rng.Intn(40)), rv, ls, extra...)
		// Every version changes the annotations (a Deployment's generation moves with them).
		generations[u.GetName()]++
		u.SetGeneration(generations[u.GetName()])
		return u
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	type client struct {
		loc string
		// resumedFrom is the resourceVersion the current watch resumed from (0: none).
		resumedFrom uint64
		pred        func(*Object) bool
		state       map[contract.Key]uint64
		lastRV      uint64
		rewatch     int
		log         []string
		initial     bool // receiving initial events (not RV-ordered) until the end bookmark
	}
	preds := []func(*Object) bool{nil, func(o *Object) bool { return o.Labels().Get("app") == "x" }}
	clients := make([]*client, 12)
	for i := range clients {
		clients[i] = &client{loc: locations[i%len(locations)], pred: preds[(i/len(locations))%2], state: map[contract.Key]uint64{}}
	}
	var finalRV uint64
	var finalMu sync.Mutex
	errs := make(chan error, len(clients))
	for i, c := range clients {
		wg.Add(1)
		go func(i int, c *client) {
			defer wg.Done()
			slow := i%3 == 2 // reads slowly, gets closed as too slow and resumes
			lg := func(f string, a ...interface{}) {
				c.log = append(c.log, fmt.Sprintf(f, a...))
				if len(c.log) > 60 {
					c.log = c.log[1:]
				}
			}
			start := func() (watch.Interface, error) {
				for {
					var w watch.Interface
					var err error
					switch {
					case c.lastRV == 0 && i%2 == 0:
						// streaming list
						c.state = map[contract.Key]uint64{}
						c.initial = true
						w, err = s.Watch(ctx, c.loc, WatchOptions{InitialEvents: true, InitialEventsEndBookmark: true, AllowBookmarks: true, Predicate: c.pred})
					case c.lastRV == 0:
						// list + watch
						res, lerr := s.List(c.loc, ListOptions{Predicate: c.pred})
						if lerr != nil {
							return nil, lerr
						}
						c.state = map[contract.Key]uint64{}
						for _, o := range res.Items {
							c.state[o.Key()] = o.ResourceVersion()
							if err := shown.note(c.loc, o); err != nil {
								return nil, err
							}
						}
						c.lastRV = res.ResourceVersion
						lg("listed %d items at %d: %v", len(res.Items), res.ResourceVersion, sortedState(c.state))
						fallthrough
					default:
						c.resumedFrom = c.lastRV
						w, err = s.Watch(ctx, c.loc, WatchOptions{ResourceVersion: c.lastRV, AllowBookmarks: true, Predicate: c.pred})
					}
					lg("watch err=%v", err)
					if apierrors.IsResourceExpired(err) {
						c.lastRV = 0 // relist
						continue
					}
					return w, err
				}
			}
			var logf func(f string, a ...interface{})
			logf = func(f string, a ...interface{}) {
				c.log = append(c.log, fmt.Sprintf(f, a...))
				if len(c.log) > 40 {
					c.log = c.log[1:]
				}
			}
			origStart := start
			start = func() (watch.Interface, error) {
				logf("start lastRV=%d store=%d", c.lastRV, s.ResourceVersion())
				return origStart()
			}
			w, err := start()
			if err != nil {
				errs <- err
				return
			}
			for {
				e, ok := <-w.ResultChan()
				if !ok {
					if ctx.Err() != nil {
						return
					}
					c.rewatch++
					if w, err = start(); err != nil {
						errs <- err
						return
					}
					finalMu.Lock()
					done := finalRV != 0 && c.lastRV >= finalRV && !c.initial
					finalMu.Unlock()
					if done {
						w.Stop()
						return
					}
					continue
				}
				if slow && rng2(i) {
					time.Sleep(time.Millisecond)
				}
				if o, ok := e.Object.(*Object); ok {
					logf("%s %s@%d", e.Type, o.Key(), o.ResourceVersion())
				} else {
					logf("%s", ev(e))
				}
				var rv uint64
				switch o := e.Object.(type) {
				case *Object:
					rv = o.ResourceVersion()
					if e.Type != watch.Deleted {
						if err := shown.note(c.loc, o); err != nil {
							errs <- fmt.Errorf("client %d: %s: %w", i, e.Type, err)
							return
						}
					}
					if c.initial && e.Type != watch.Added {
						errs <- fmt.Errorf("client %d: %s during initial events", i, e.Type)
						return
					}
					if !c.initial && rv < c.lastRV {
						errs <- fmt.Errorf("client %d: %s %s@%d after RV %d", i, e.Type, o.Key(), rv, c.lastRV)
						return
					}
					knownRV, known := c.state[o.Key()]
					// A re-rendering at exactly the resume point is replayed (the client may
					// have seen it, or listed after it): an ADDED of the object it knows at
					// that resourceVersion, or a DELETED of one it does not know (client-go's
					// DeltaFIFO drops such a deletion).
					replayed := renderer != nil && rv == c.resumedFrom &&
						((e.Type == watch.Added && knownRV == rv) || (e.Type == watch.Deleted && !known))
					switch {
					case replayed:
					case e.Type == watch.Added && known, e.Type != watch.Added && !known:
						errs <- fmt.Errorf("client %d (%s): %s %s@%d, known=%v\n%s", i, c.loc, e.Type, o.Key(), rv, known, strings.Join(c.log, "\n"))
						return
					case !o.HasLocation(c.loc) && e.Type != watch.Deleted:
						errs <- fmt.Errorf("client %d: %s of an object not in %s", i, e.Type, c.loc)
						return
					}
					if e.Type == watch.Deleted {
						delete(c.state, o.Key())
					} else {
						c.state[o.Key()] = rv
					}
				case *bookmark:
					rv, _ = strconv.ParseUint(o.u.GetResourceVersion(), 10, 64)
					c.initial = false
				}
				if c.initial {
					continue
				}
				c.lastRV = rv
				finalMu.Lock()
				done := finalRV != 0 && c.lastRV >= finalRV
				finalMu.Unlock()
				if done {
					w.Stop()
					return
				}
			}
		}(i, c)
	}

	// A paging client: pages of a list must be consistent (sorted, unique, nothing newer than
	// the first page's RV) even while ingest runs.
	pagingDone := make(chan struct{})
	go func() {
		defer close(pagingDone)
		for ctx.Err() == nil {
			loc := locations[rng2int(len(locations))]
			page, err := s.List(loc, ListOptions{Limit: 3})
			if err != nil {
				errs <- err
				return
			}
			snap := page.ResourceVersion
			var last contract.Key
			for {
				for _, o := range page.Items {
					if o.Key() <= last || o.ResourceVersion() > snap || !o.HasLocation(loc) {
						errs <- fmt.Errorf("inconsistent page of %s at %d: %s@%d after %s", loc, snap, o.Key(), o.ResourceVersion(), last)
						return
					}
					if err := shown.note(loc, o); err != nil {
						errs <- fmt.Errorf("page: %w", err)
						return
					}
					last = o.Key()
				}
				if !page.More {
					break
				}
				page, err = s.List(loc, ListOptions{Limit: 3, After: last, SnapshotRV: snap})
				if apierrors.IsResourceExpired(err) {
					break
				}
				if err != nil || page.ResourceVersion != snap {
					errs <- fmt.Errorf("continue: %v (rv %d, want %d)", err, page.ResourceVersion, snap)
					return
				}
			}
		}
	}()
	defer func() { cancel(); <-pagingDone }()

	// Ingest.
	rv := uint64(1)
	present := map[string]*unstructured.Unstructured{}
	for step := 0; step < 4000; step++ {
		rv++
		switch r := rng.Intn(100); {
		case r < 70:
			u := randomObj(rv)
			k := string(s.identify(u).key)
			if present[k] == nil {
				mustAdd(t, s, u)
			} else {
				mustUpdate(t, s, u)
			}
			present[k] = u
		case r < 90:
			for k, u := range present {
				d := u.DeepCopy()
				d.SetResourceVersion(strconv.FormatUint(rv, 10))
				mustDelete(t, s, d)
				delete(present, k)
				break
			}
		case r < 96:
			s.UpdateResourceVersion(strconv.FormatUint(rv, 10))
		case r < 97:
			if setRules != nil {
				setRules(step)
			}
		default:
			// Relist: some objects changed, some vanished, some new.
			next := map[string]*unstructured.Unstructured{}
			for k, u := range present {
				if rng.Intn(4) > 0 {
					next[k] = u
				} else {
					rv++ // the (unseen) delete used an RV of the source
				}
			}
			for i := 0; i < 5; i++ {
				rv++
				u := randomObj(rv)
				next[string(s.identify(u).key)] = u
			}
			rv++
			var items []*unstructured.Unstructured
			for _, u := range next {
				items = append(items, u)
			}
			mustReplace(t, s, rv, items...)
			present = next
		}
		if step%500 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	// Last, each object's first location writes its status record, alone: a change of that
	// location's .status only, which its view shows at the generation it showed before, and
	// the other views not at all.
	for k, u := range present {
		ls, err := contract.ParseLocations(u.GetAnnotations()[contract.AssignedLocationsAnnotation])
		if err != nil || len(ls) == 0 {
			continue
		}
		rv++
		w := u.DeepCopy()
		ann := w.GetAnnotations()
		ann[contract.StatusPolicyAnnotation] = contract.StatusPolicyReflect
		ann[contract.StatusRecordAnnotationPrefix+ls[0]] = fmt.Sprintf(`{"final":%d}`, rv)
		w.SetAnnotations(ann)
		w.SetResourceVersion(strconv.FormatUint(rv, 10))
		generations[w.GetName()]++
		w.SetGeneration(generations[w.GetName()])
		mustUpdate(t, s, w)
		present[k] = w
	}
	if renderer != nil {
		// Every rendering made and applied before the last resourceVersion.
		waitRendered(t, ctx, s)
		rendered := 0
		s.mu.RLock()
		for _, o := range s.objects {
			if len(o.rendered) > 0 {
				rendered++
			}
		}
		s.mu.RUnlock()
		if rendered == 0 {
			t.Fatal("no object is rendered by the Customization: the test exercises nothing")
		}
		t.Logf("%d objects rendered by the Customization", rendered)
		rv = max(rv, s.ResourceVersion())
	}
	rv++
	finalMu.Lock()
	finalRV = rv
	finalMu.Unlock()
	s.UpdateResourceVersion(strconv.FormatUint(rv, 10))

	waitDone := make(chan struct{})
	go func() { wg.Wait(); close(waitDone) }()
	select {
	case <-waitDone:
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		for i, c := range clients {
			t.Logf("client %d loc %s lastRV %d initial %v rewatch %d", i, c.loc, c.lastRV, c.initial, c.rewatch)
		}
		t.Logf("locations %+v", s.Locations())
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("clients did not catch up to %d\n%s", finalRV, buf)
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	rewatches := 0
	for i, c := range clients {
		rewatches += c.rewatch
		res, err := s.List(c.loc, ListOptions{Predicate: c.pred})
		if err != nil {
			t.Fatal(err)
		}
		want := map[contract.Key]uint64{}
		for _, o := range res.Items {
			want[o.Key()] = o.ResourceVersion()
		}
		if fmt.Sprint(sortedState(want)) != fmt.Sprint(sortedState(c.state)) {
			t.Errorf("client %d (%s): state\n got %v\nwant %v", i, c.loc, sortedState(c.state), sortedState(want))
		}
	}
	t.Logf("re-watches after slow close: %d", rewatches)

	// A restarted server lists the final state at a resourceVersion above every one handed out
	// (Cache.fence), with the same rules, whose renderings it makes anew.
	restarted := newTestStore(t, StoreOptions{Renderer: renderer})
	if rules != nil {
		restarted.SetRules(rules, 0)
	}
	var items []*unstructured.Unstructured
	for _, u := range present {
		items = append(items, u)
	}
	mustReplace(t, restarted, rv+1, items...)
	if renderer != nil {
		waitRendered(t, ctx, restarted)
	}
	for _, loc := range locations {
		res, err := restarted.List(loc, ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Items {
			if err := shown.note(loc, o); err != nil {
				t.Errorf("after a restart: %v", err)
			}
		}
	}
	t.Logf("(location, object, resourceVersion) shown: %d", shown.len())
}

// waitRendered waits until no object of s has a pending rendering (Object.pendingLocations),
// failing t after 10 seconds. While some are pending it moves the store on with source
// bookmarks, as a real source's progress does: a rendering that found no resourceVersion above
// the one its view showed (this test's source offers no fresh one) is made again at the next.
func waitRendered(t *testing.T, ctx context.Context, s *ResourceStore) {
	t.Helper()
	pending := func() (rv uint64, keys []string) {
		s.mu.RLock()
		defer s.mu.RUnlock()
		for _, o := range s.objects {
			if ls := o.pendingLocations(); len(ls) > 0 {
				keys = append(keys, fmt.Sprintf("%s@%d%v", o.key, o.rv, ls))
			}
		}
		return s.rv, keys
	}
	var last []string
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		rv, keys := pending()
		if len(keys) == 0 {
			return true, nil
		}
		last = keys
		s.UpdateResourceVersion(strconv.FormatUint(rv+1, 10))
		return false, nil
	})
	if err != nil {
		t.Fatalf("renderings still pending: %v: %v", err, last)
	}
}

// shownContents records the content each (location, object, resourceVersion) was shown with.
type shownContents struct {
	mu sync.Mutex
	m  map[string]string
}

func newShownContents() *shownContents { return &shownContents{m: map[string]string{}} }

// note records o as location's view shows it, and returns an error when the same object was
// shown to location at the same resourceVersion with other content.
func (c *shownContents) note(location string, o *Object) error {
	raw, err := o.MarshalJSON()
	if err != nil {
		return err
	}
	k := fmt.Sprintf("%s|%s@%d", location, o.Key(), o.ResourceVersion())
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.m[k]; ok && prev != string(raw) && !sameJSON(prev, raw) {
		return fmt.Errorf("%s shown with two contents:\n%s\n%s", k, prev, raw)
	}
	c.m[k] = string(raw)
	return nil
}

// sameJSON reports whether a and b are the same JSON value (members in any order).
func sameJSON(a string, b []byte) bool {
	var x, y interface{}
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// len returns how many (location, object, resourceVersion) were shown.
func (c *shownContents) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

var rngMu sync.Mutex
var rngShared = rand.New(rand.NewSource(2))

func rng2(int) bool {
	rngMu.Lock()
	defer rngMu.Unlock()
	return rngShared.Intn(4) == 0
}

func sortedState(m map[contract.Key]uint64) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s@%d", k, v))
	}
	sort.Strings(out)
	return out
}

func rng2int(n int) int {
	rngMu.Lock()
	defer rngMu.Unlock()
	return rngShared.Intn(n)
}
