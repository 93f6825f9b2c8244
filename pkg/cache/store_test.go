package cache

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// TestAssignmentSequence follows one object through assign / re-assign / edit / unassign /
// delete and checks the exact stream of every location.
func TestAssignmentSequence(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 10)
	east := mustWatch(t, s, "east", WatchOptions{})
	west := mustWatch(t, s, "west", WatchOptions{})
	north := mustWatch(t, s, "north", WatchOptions{})
	other := mustWatch(t, s, "other", WatchOptions{})

	mustAdd(t, s, cm("ns", "a", 11, locs("east")))
	expect(t, east, "ADDED a@11")
	mustUpdate(t, s, cm("ns", "a", 12, locs("east", "west"), "d:v=12"))
	expect(t, east, "MODIFIED a@12")
	expect(t, west, "ADDED a@12")
	mustUpdate(t, s, cm("ns", "a", 13, locs("west"), "d:v=13"))
	e := next(t, east)
	if ev(e) != "DELETED a@13" {
		t.Fatalf("east got %s", ev(e))
	}
	// The DELETED object is the old content (still assigned to east) at the event's RV, as
	// east's view shows it (naming east alone).
	deleted := e.Object.(*Object).Unstructured()
	if got, _, _ := unstructured.NestedString(deleted.Object, "data", "v"); got != "12" {
		t.Fatalf("DELETED object content is not the previous version: data.v %q", got)
	}
	if got := deleted.GetAnnotations()[contract.AssignedLocationsAnnotation]; got != `["east"]` {
		t.Fatalf("DELETED object names other locations: annotation %q", got)
	}
	expect(t, west, "MODIFIED a@13")
	mustUpdate(t, s, cm("ns", "a", 14, nil))
	expect(t, west, "DELETED a@14")
	mustUpdate(t, s, cm("ns", "a", 15, locs("north")))
	expect(t, north, "ADDED a@15")
	mustUpdate(t, s, cm("ns", "a", 16, locs("north"), "d:k=v"))
	expect(t, north, "MODIFIED a@16")
	mustDelete(t, s, cm("ns", "a", 17, locs("north"), "d:k=v"))
	expect(t, north, "DELETED a@17")
	expectNothing(t, east)
	expectNothing(t, west)
	expectNothing(t, other)
	if got := s.ResourceVersion(); got != 17 {
		t.Fatalf("ResourceVersion = %d, want 17", got)
	}
	// Same RV again is not a change.
	mustAdd(t, s, cm("ns", "b", 18, locs("east")))
	mustUpdate(t, s, cm("ns", "b", 18, locs("east")))
	expect(t, east, "ADDED b@18")
}

// TestSelectorEnterExit checks that a predicate behaves like a kube-apiserver label-selector
// watch: entering the selection is ADDED, leaving it DELETED with the old content.
func TestSelectorEnterExit(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 1)
	sel := labels.SelectorFromSet(labels.Set{"app": "x"})
	pred := func(o *Object) bool { return sel.Matches(o.Labels()) }
	w := mustWatch(t, s, "east", WatchOptions{Predicate: pred})
	all := mustWatch(t, s, "east", WatchOptions{})

	mustAdd(t, s, cm("ns", "a", 2, locs("east")))
	mustUpdate(t, s, cm("ns", "a", 3, locs("east"), "l:app=x"))
	mustUpdate(t, s, cm("ns", "a", 4, locs("east"), "l:app=x", "d:k=1"))
	mustUpdate(t, s, cm("ns", "a", 5, locs("east"), "l:app=y"))
	mustUpdate(t, s, cm("ns", "a", 6, locs("east"), "l:app=x"))
	mustUpdate(t, s, cm("ns", "a", 7, locs("west"), "l:app=x"))
	expect(t, w, "ADDED a@3", "MODIFIED a@4", "DELETED a@5", "ADDED a@6", "DELETED a@7")
	expect(t, all, "ADDED a@2", "MODIFIED a@3", "MODIFIED a@4", "MODIFIED a@5", "MODIFIED a@6", "DELETED a@7")

	// Field selector on metadata.name.
	byName := mustWatch(t, s, "west", WatchOptions{Predicate: func(o *Object) bool { return o.Fields().Get("metadata.name") == "b" }})
	mustAdd(t, s, cm("ns", "b", 8, locs("west")))
	mustAdd(t, s, cm("ns", "c", 9, locs("west")))
	expect(t, byName, "ADDED b@8")
}

// TestResume checks that a watch resumed from RV R gets exactly the events after R that a
// live watch got, for several R, with and without a predicate.
func TestResume(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 100, cm("ns", "pre", 90, locs("east")))
	pred := func(o *Object) bool { return o.Labels().Get("keep") == "1" }
	live := mustWatch(t, s, "east", WatchOptions{})
	livePred := mustWatch(t, s, "east", WatchOptions{Predicate: pred})

	mustAdd(t, s, cm("ns", "a", 101, locs("east"), "l:keep=1"))
	mustAdd(t, s, cm("ns", "b", 102, locs("west")))
	mustUpdate(t, s, cm("ns", "b", 103, locs("east", "west")))
	mustUpdate(t, s, cm("ns", "a", 104, locs("east")))
	mustAdd(t, s, cm("ns", "c", 105, nil))
	mustUpdate(t, s, cm("ns", "pre", 106, nil))
	mustUpdate(t, s, cm("ns", "a", 107, locs("east"), "l:keep=1"))
	mustDelete(t, s, cm("ns", "b", 108, locs("east", "west")))
	s.UpdateResourceVersion("110")

	var liveEvents, predEvents []watch.Event
	for i := 0; i < 6; i++ {
		liveEvents = append(liveEvents, next(t, live))
	}
	for i := 0; i < 3; i++ {
		predEvents = append(predEvents, next(t, livePred))
	}
	expectNothing(t, live)
	expectNothing(t, livePred)
	render := func(es []watch.Event, after uint64) []string {
		var out []string
		for _, e := range es {
			if e.Object.(*Object).ResourceVersion() > after {
				out = append(out, ev(e))
			}
		}
		return out
	}
	for _, r := range []uint64{100, 101, 102, 103, 105, 107, 108, 110} {
		w := mustWatch(t, s, "east", WatchOptions{ResourceVersion: r})
		expect(t, w, render(liveEvents, r)...)
		wp := mustWatch(t, s, "east", WatchOptions{ResourceVersion: r, Predicate: pred})
		expect(t, wp, render(predEvents, r)...)
	}
	// After resuming, live events keep coming.
	w := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 104})
	expect(t, w, "DELETED pre@106", "MODIFIED a@107", "DELETED b@108")
	mustAdd(t, s, cm("ns", "d", 111, locs("east")))
	expect(t, w, "ADDED d@111")
}

func TestResumeTooOld(t *testing.T) {
	s := newTestStore(t, StoreOptions{HistorySize: 3})
	mustReplace(t, s, 10)
	if _, err := s.Watch(context.Background(), "east", WatchOptions{ResourceVersion: 9}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch before the list RV: got %v, want 410 Expired", err)
	}
	for rv := uint64(11); rv <= 16; rv++ {
		mustAdd(t, s, cm("ns", "o", rv, locs("east")))
	}
	// History keeps 14,15,16: resuming from 13 works, from 12 does not.
	w := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 13})
	expect(t, w, "MODIFIED o@14", "MODIFIED o@15", "MODIFIED o@16")
	_, err := s.Watch(context.Background(), "east", WatchOptions{ResourceVersion: 12})
	if !apierrors.IsResourceExpired(err) || apierrors.ReasonForError(err) != "Expired" {
		t.Fatalf("got %v, want 410 Expired", err)
	}
	if want := "too old resource version: 12 (13)"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not contain %q", err, want)
	}
	if code := err.(apierrors.APIStatus).Status().Code; code != 410 {
		t.Fatalf("code %d, want 410", code)
	}
	// Unassigned objects' events do not use up the history.
	for rv := uint64(17); rv <= 30; rv++ {
		mustAdd(t, s, cm("ns", "unassigned", rv, nil))
	}
	w = mustWatch(t, s, "east", WatchOptions{ResourceVersion: 13})
	expect(t, w, "MODIFIED o@14", "MODIFIED o@15", "MODIFIED o@16")
}

// TestResumeTooLarge: a resume from a resourceVersion the store has not reached is
// k8s.io/apiserver's 504 at once (the view waited for it with its freshness timeout); once the
// store reached it, the watch works and never sends events up to that resourceVersion.
func TestResumeTooLarge(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 10)
	start := time.Now()
	_, err := s.Watch(context.Background(), "east", WatchOptions{ResourceVersion: 20})
	if !storage.IsTooLargeResourceVersion(err) || !apierrors.IsTimeout(err) {
		t.Fatalf("got %v, want Too large resource version (504)", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the store waited %v: the caller's wait is the only one", d)
	}
	mustAdd(t, s, cm("ns", "a", 15, locs("east")))
	mustAdd(t, s, cm("ns", "b", 16, locs("east")))
	w := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 15})
	expect(t, w, "ADDED b@16")
}

func TestInitialEvents(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 50,
		cm("ns", "c", 41, locs("east")),
		cm("ns", "a", 42, locs("east", "west")),
		cm("ns", "b", 43, locs("west")),
		cm("other", "a", 44, locs("east"), "l:skip=1"),
	)
	w := mustWatch(t, s, "east", WatchOptions{InitialEvents: true, InitialEventsEndBookmark: true, AllowBookmarks: true})
	expect(t, w, "ADDED a@42", "ADDED c@41", "ADDED a@44", "BOOKMARK@50+end")
	mustUpdate(t, s, cm("ns", "c", 51, locs("west")))
	expect(t, w, "DELETED c@51")

	// With a predicate, without the bookmark; an empty location.
	p := mustWatch(t, s, "east", WatchOptions{InitialEvents: true, Predicate: func(o *Object) bool { return o.Labels().Get("skip") == "" }})
	expect(t, p, "ADDED a@42")
	e := mustWatch(t, s, "nowhere", WatchOptions{InitialEvents: true, InitialEventsEndBookmark: true})
	expect(t, e, "BOOKMARK@51+end")
	mustAdd(t, s, cm("ns", "z", 52, locs("nowhere")))
	expect(t, e, "ADDED z@52")
}

// TestInitialEventsUnderLoad checks that the initial events and live events neither overlap nor
// leave a gap while ingest runs concurrently, and that the initial snapshot does not count
// against the watcher buffer.
func TestInitialEventsUnderLoad(t *testing.T) {
	s := newTestStore(t, StoreOptions{WatcherBufferSize: 5000})
	var initial []*unstructured.Unstructured
	for i := 0; i < 3000; i++ {
		initial = append(initial, cm("ns", name(i), uint64(i+1), locs("east")))
	}
	mustReplace(t, s, 3000, initial...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 1000; i++ {
			mustUpdate(t, s, cm("ns", name(i), uint64(3001+i), locs("east"), "d:v=1"))
		}
	}()
	// Open the watch once ingest is under way (while it runs on, as far as the machine lets it).
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Microsecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return s.ResourceVersion() > 3010, nil
	}); err != nil {
		t.Fatal("ingest did not start")
	}
	w := mustWatch(t, s, "east", WatchOptions{InitialEvents: true, InitialEventsEndBookmark: true})
	<-done
	state := map[string]uint64{}
	var startRV uint64
	for startRV == 0 {
		e := next(t, w)
		if e.Type == watch.Bookmark {
			startRV = rvOf(e)
			continue
		}
		if e.Type != watch.Added {
			t.Fatalf("initial event %s", ev(e))
		}
		state[e.Object.(*Object).Name()] = rvOf(e)
	}
	for len(state) != 3000 || maxRV(state) < 4000 {
		e := next(t, w)
		if r := rvOf(e); r <= startRV {
			t.Fatalf("live event %s not after the initial state RV %d", ev(e), startRV)
		}
		if e.Type != watch.Modified {
			t.Fatalf("live event %s", ev(e))
		}
		state[e.Object.(*Object).Name()] = rvOf(e)
	}
	for i := 0; i < 1000; i++ {
		if state[name(i)] != uint64(3001+i) {
			t.Fatalf("%s at %d, want %d", name(i), state[name(i)], 3001+i)
		}
	}
	expectNothing(t, w)
}

func name(i int) string { return fmt.Sprintf("o%05d", i) }

func rvOf(e watch.Event) uint64 {
	switch o := e.Object.(type) {
	case *Object:
		return o.ResourceVersion()
	case *bookmark:
		return o.rv
	case *unstructured.Unstructured:
		var rv uint64
		for _, c := range o.GetResourceVersion() {
			rv = rv*10 + uint64(c-'0')
		}
		return rv
	}
	return 0
}

func maxRV(m map[string]uint64) uint64 {
	var r uint64
	for _, v := range m {
		r = max(r, v)
	}
	return r
}

func TestSlowWatcherClosed(t *testing.T) {
	s := newTestStore(t, StoreOptions{WatcherBufferSize: 2})
	mustReplace(t, s, 1)
	before, _ := testutil.GetCounterMetricValue(slowWatchersClosed.WithLabelValues("configmaps"))
	slow := mustWatch(t, s, "east", WatchOptions{})
	fast := mustWatch(t, s, "east", WatchOptions{})
	for i := 0; i < 10; i++ {
		// Ingest never blocks on the slow watcher (which never reads); the fast one reads
		// every event.
		mustAdd(t, s, cm("ns", name(i), uint64(2+i), locs("east")))
		if got, want := ev(next(t, fast)), fmt.Sprintf("ADDED %s@%d", name(i), 2+i); got != want {
			t.Fatalf("fast watcher got %s, want %s", got, want)
		}
	}
	expectClosed(t, slow)
	after, _ := testutil.GetCounterMetricValue(slowWatchersClosed.WithLabelValues("configmaps"))
	if after-before != 1 {
		t.Fatalf("slow watchers metric moved by %v, want 1", after-before)
	}
	if st := s.Locations()["east"]; st.Watchers != 1 {
		t.Fatalf("watchers = %d, want 1", st.Watchers)
	}
	// The client re-watches from its last RV and gets what it missed.
	w := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 9})
	expect(t, w, "ADDED o00008@10", "ADDED o00009@11")
}

func TestReplaceDiff(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 10,
		cm("ns", "a", 5, locs("east")),
		cm("ns", "b", 6, locs("east")),
		cm("ns", "c", 7, locs("east")),
		cm("ns", "m", 8, locs("west")),
	)
	if !s.HasSynced() || s.ResourceVersion() != 10 {
		t.Fatalf("synced=%v rv=%d", s.HasSynced(), s.ResourceVersion())
	}
	w := mustWatch(t, s, "east", WatchOptions{})
	mustAdd(t, s, cm("ns", "x", 11, locs("east")))
	expect(t, w, "ADDED x@11")
	// A relist that only shows new versions (each at its own RV above the store's) is a set of
	// real events: the watch stays open and gets them in RV order, and they are resumable.
	mustReplace(t, s, 14,
		cm("ns", "a", 5, locs("east")),
		cm("ns", "b", 6, locs("east")),
		cm("ns", "c", 7, locs("east")),
		cm("ns", "d", 13, locs("east")),
		cm("ns", "m", 12, locs("east")),
		cm("ns", "x", 11, locs("east")),
	)
	expect(t, w, "ADDED m@12", "ADDED d@13")
	r := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 11})
	expect(t, r, "ADDED m@12", "ADDED d@13")
	r.Stop()
	if s.ResourceVersion() != 14 {
		t.Fatalf("rv=%d", s.ResourceVersion())
	}

	// Relist at 20: a unchanged, b changed at 15, c and x gone. The deletions' RVs are unknown,
	// so (the cacher's rule) the history restarts at 20 and every watch ends.
	mustReplace(t, s, 20,
		cm("ns", "a", 5, locs("east")),
		cm("ns", "b", 15, locs("east"), "d:k=v"),
		cm("ns", "d", 13, locs("east")),
		cm("ns", "m", 12, locs("east")),
	)
	expectClosed(t, w)
	if s.ResourceVersion() != 20 {
		t.Fatalf("rv=%d", s.ResourceVersion())
	}
	// A resume from before the list is 410 (client-go relists), never a history with
	// invented deletion RVs; from the list's RV on, the history is complete.
	for _, from := range []uint64{11, 14, 19} {
		if _, err := s.Watch(context.Background(), "east", WatchOptions{ResourceVersion: from}); !apierrors.IsResourceExpired(err) {
			t.Fatalf("resume from %d after the relist: got %v, want 410", from, err)
		}
	}
	r = mustWatch(t, s, "east", WatchOptions{ResourceVersion: 20})
	mustDelete(t, s, cm("ns", "a", 21, locs("east")))
	expect(t, r, "DELETED a@21")
	res, _ := s.List("east", ListOptions{})
	if got := names(res.Items); got != "b,d,m" {
		t.Fatalf("list after relist: %s", got)
	}
	// An older relist never moves RVs backwards; it restarts the history too.
	mustReplace(t, s, 18, cm("ns", "b", 15, locs("east"), "d:k=v"))
	expectClosed(t, r)
	if s.ResourceVersion() != 21 {
		t.Fatalf("rv=%d", s.ResourceVersion())
	}
	if res, _ := s.List("east", ListOptions{}); names(res.Items) != "b" {
		t.Fatalf("list after the older relist: %s", names(res.Items))
	}
}

func names(objs []*Object) string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Name())
	}
	return strings.Join(out, ",")
}

func TestListPaging(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	s := newTestStore(t, StoreOptions{Clock: clk, SnapshotTTL: time.Minute})
	var objs []*unstructured.Unstructured
	for i := 0; i < 10; i++ {
		objs = append(objs, cm("ns", name(i), uint64(i+1), locs("east")))
	}
	objs = append(objs, cm("ns", "zz-other", 11, locs("west")), cm("ns", "unassigned", 12, nil))
	mustReplace(t, s, 100, objs...)

	all, err := s.List("east", ListOptions{})
	if err != nil || len(all.Items) != 10 || all.More || all.ResourceVersion != 100 {
		t.Fatalf("full list: %d items more=%v rv=%d err=%v", len(all.Items), all.More, all.ResourceVersion, err)
	}
	p1, _ := s.List("east", ListOptions{Limit: 4})
	if names(p1.Items) != "o00000,o00001,o00002,o00003" || !p1.More || p1.ResourceVersion != 100 {
		t.Fatalf("page 1: %s more=%v", names(p1.Items), p1.More)
	}
	// Changes after the first page do not show in the continue pages.
	mustDelete(t, s, cm("ns", name(5), 101, locs("east")))
	mustAdd(t, s, cm("ns", "o00004a", 102, locs("east")))
	cont := func(prev ListResult) ListResult {
		t.Helper()
		r, err := s.List("east", ListOptions{Limit: 4, After: prev.Items[len(prev.Items)-1].Key(), SnapshotRV: prev.ResourceVersion})
		if err != nil {
			t.Fatalf("continue: %v", err)
		}
		return r
	}
	p2 := cont(p1)
	if names(p2.Items) != "o00004,o00005,o00006,o00007" || !p2.More || p2.ResourceVersion != 100 {
		t.Fatalf("page 2: %s more=%v rv=%d", names(p2.Items), p2.More, p2.ResourceVersion)
	}
	p3 := cont(p2)
	if names(p3.Items) != "o00008,o00009" || p3.More {
		t.Fatalf("page 3: %s more=%v", names(p3.Items), p3.More)
	}
	// Exact page boundary: More is false when nothing matches after.
	exact, _ := s.List("east", ListOptions{Limit: 10})
	if len(exact.Items) != 10 || exact.More {
		t.Fatalf("exact: %d more=%v", len(exact.Items), exact.More)
	}
	// A predicate with paging.
	even := func(o *Object) bool { return (o.Name()[len(o.Name())-1]-'0')%2 == 0 }
	q1, _ := s.List("east", ListOptions{Limit: 2, Predicate: even})
	q2, _ := s.List("east", ListOptions{Limit: 2, Predicate: even, After: q1.Items[1].Key(), SnapshotRV: q1.ResourceVersion})
	if names(q1.Items) != "o00000,o00002" || names(q2.Items) != "o00004,o00006" || !q2.More {
		t.Fatalf("predicate pages: %s / %s", names(q1.Items), names(q2.Items))
	}

	// The snapshot expires; a location changed since the snapshot's RV then answers 410.
	clk.Step(2 * time.Minute)
	_, err = s.List("east", ListOptions{Limit: 4, After: p1.Items[3].Key(), SnapshotRV: 100})
	if !apierrors.IsResourceExpired(err) {
		t.Fatalf("expired snapshot: got %v, want 410", err)
	}
	// A location that did not change since the RV is served from the live state.
	w, err := s.List("west", ListOptions{SnapshotRV: 100})
	if err != nil || names(w.Items) != "zz-other" || w.ResourceVersion != 100 {
		t.Fatalf("unchanged location: %v %v", names(w.Items), err)
	}
	// An RV ahead of the store is not a snapshot we can serve.
	if _, err := s.List("west", ListOptions{SnapshotRV: 1000}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("future snapshot: %v", err)
	}
	// Unknown location: empty, not an error.
	if r, err := s.List("nowhere", ListOptions{}); err != nil || len(r.Items) != 0 || r.Items == nil {
		t.Fatalf("unknown location: %#v %v", r, err)
	}
}

func TestClustersDoNotCollide(t *testing.T) {
	s := newTestStore(t, StoreOptions{ClusterFromAnnotation: true})
	mustReplace(t, s, 10,
		cm("ns", "same", 1, locs("east"), "a:kcp.io/cluster=zeta", "d:from=zeta"),
		cm("ns", "same", 2, locs("east"), "a:kcp.io/cluster=alpha", "d:from=alpha"),
		cm("ns", "same", 3, locs("east"), "a:kcp.io/cluster=root"),
	)
	res, _ := s.List("east", ListOptions{})
	var keys []string
	for _, o := range res.Items {
		keys = append(keys, string(o.Key()))
	}
	if strings.Join(keys, " ") != "alpha|ns/same root|ns/same zeta|ns/same" {
		t.Fatalf("keys %v", keys)
	}
	o, _, ok := s.Get("east", "ns", "same")
	if !ok || o.Cluster() != "alpha" {
		t.Fatalf("Get: %v %v", o, ok)
	}
	if n := s.Namespaces("east", contract.ViewPart{})["ns"]; n != 3 {
		t.Fatalf("namespace count %d", n)
	}
	w := mustWatch(t, s, "east", WatchOptions{})
	u := cm("ns", "same", 11, locs("east"), "a:kcp.io/cluster=alpha")
	mustDelete(t, s, u)
	expect(t, w, "DELETED same@11")
	o, _, ok = s.Get("east", "ns", "same")
	if !ok || o.Cluster() != "root" {
		t.Fatalf("Get after delete: %v %v", o, ok)
	}
	mustUpdate(t, s, cm("ns", "same", 12, locs("east"), "a:kcp.io/cluster=zeta", "d:from=zeta2"))
	expect(t, w, "MODIFIED same@12")
	if st := s.Locations()["east"]; st.Objects != 2 {
		t.Fatalf("objects %d", st.Objects)
	}
}

func TestMalformedAnnotationUnassigns(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 1)
	before, _ := testutil.GetCounterMetricValue(malformedAssignments.WithLabelValues("configmaps"))
	w := mustWatch(t, s, "east", WatchOptions{})
	mustAdd(t, s, cm("ns", "a", 2, locs("east")))
	bad := cm("ns", "a", 3, nil, "a:kcp.io/assigned-locations=[east")
	mustUpdate(t, s, bad)
	mustUpdate(t, s, bad) // same version: not counted twice
	expect(t, w, "ADDED a@2", "DELETED a@3")
	for i, v := range []string{`"east"`, `[]`, `["East"]`, `[1]`} {
		mustUpdate(t, s, cm("ns", "a", uint64(4+i), nil, "a:kcp.io/assigned-locations="+v))
	}
	// A non-string annotation value never panics either.
	u := cm("ns", "a", 8, nil)
	u.Object["metadata"].(map[string]interface{})["annotations"] = map[string]interface{}{contract.AssignedLocationsAnnotation: []interface{}{"east"}}
	mustUpdate(t, s, u)
	// Garbage metadata.
	mustAdd(t, s, &unstructured.Unstructured{Object: map[string]interface{}{"metadata": "nope"}})
	mustAdd(t, s, &unstructured.Unstructured{Object: map[string]interface{}{"metadata": map[string]interface{}{"name": 5, "annotations": "x", "labels": []interface{}{1}}}})
	if err := s.Add("not an object"); err == nil {
		t.Fatalf("Add of a string succeeded")
	}
	after, _ := testutil.GetCounterMetricValue(malformedAssignments.WithLabelValues("configmaps"))
	if after-before != 6 {
		t.Fatalf("malformed metric moved by %v, want 6", after-before)
	}
	if o, _, ok := s.Get("east", "ns", "a"); ok {
		t.Fatalf("malformed object still assigned: %v", o)
	}
	mustUpdate(t, s, cm("ns", "a", 9, locs("east")))
	expect(t, w, "ADDED a@9")

	// Garbage through every ingest path never panics.
	if err := s.Delete(toolscache.DeletedFinalStateUnknown{Key: "x"}); err == nil {
		t.Fatalf("Delete without an object succeeded")
	}
	mustDelete(t, s, &unstructured.Unstructured{Object: map[string]interface{}{"metadata": "nope"}})
	mustAdd(t, s, &unstructured.Unstructured{Object: map[string]interface{}{"metadata": map[string]interface{}{"name": "g", "namespace": "ns", "resourceVersion": "x"}}})
	mustDelete(t, s, &unstructured.Unstructured{})
	mustDelete(t, s, &unstructured.Unstructured{Object: map[string]interface{}{"metadata": map[string]interface{}{"name": "g", "namespace": "ns"}}})
	mustReplace(t, s, 20, &unstructured.Unstructured{Object: map[string]interface{}{"metadata": []interface{}{}}}, cm("ns", "a", 9, locs("east")))
	if err := s.Replace([]interface{}{"junk", nil}, "21"); err != nil {
		t.Fatalf("Replace with junk items: %v", err)
	}
	if err := s.Replace(nil, "not-a-number"); err == nil {
		t.Fatalf("Replace with a bad RV succeeded")
	}
	// The relist that dropped a ended the watch (its deletion's RV is unknown).
	expectClosed(t, w)
	if r, _ := s.List("east", ListOptions{}); len(r.Items) != 0 || r.ResourceVersion != 21 {
		t.Fatalf("after the relists: %d items at %d", len(r.Items), r.ResourceVersion)
	}
}

func TestBookmarks(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	s := newTestStore(t, StoreOptions{Clock: clk, BookmarkInterval: time.Second})
	mustReplace(t, s, 10)
	w := mustWatch(t, s, "east", WatchOptions{AllowBookmarks: true})
	nb := mustWatch(t, s, "east", WatchOptions{})
	w2 := mustWatch(t, s, "west", WatchOptions{AllowBookmarks: true})
	waitTicker(t, clk)
	step(t, s, clk, time.Second)
	expectNothing(t, w) // RV has not moved
	s.UpdateResourceVersion("15")
	step(t, s, clk, time.Second)
	// Both watchers get the same BOOKMARK object, encoded once per encoder.
	e1, e2 := next(t, w), next(t, w2)
	if ev(e1) != "BOOKMARK@15" || ev(e2) != "BOOKMARK@15" {
		t.Fatalf("got %s and %s, want BOOKMARK@15 twice", ev(e1), ev(e2))
	}
	if e1.Object != e2.Object {
		t.Errorf("the watchers got two BOOKMARK objects at the same resourceVersion")
	}
	encodes := 0
	encode := func(obj runtime.Object, out io.Writer) error {
		encodes++
		return unstructured.UnstructuredJSONScheme.Encode(obj, out)
	}
	var first, second bytes.Buffer
	for _, out := range []*bytes.Buffer{&first, &second} {
		if err := e1.Object.(runtime.CacheableObject).CacheEncode("json", encode, out); err != nil {
			t.Fatal(err)
		}
	}
	const want = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"resourceVersion":"15"}}` + "\n"
	if encodes != 1 || first.String() != want || second.String() != want {
		t.Errorf("encoded %d times, wrote %q and %q, want once and %q", encodes, first.String(), second.String(), want)
	}
	mustAdd(t, s, cm("ns", "a", 16, locs("east")))
	mustAdd(t, s, cm("ns", "b", 17, locs("west")))
	step(t, s, clk, time.Second)
	expect(t, w, "ADDED a@16", "BOOKMARK@17")
	expect(t, w2, "ADDED b@17") // no BOOKMARK at the resourceVersion of its last event
	expect(t, nb, "ADDED a@16")
	// Bookmarks from the source that go backwards are ignored.
	s.UpdateResourceVersion("12")
	if s.ResourceVersion() != 17 {
		t.Fatalf("rv %d", s.ResourceVersion())
	}
}

// waitTicker waits until the store's bookmark ticker waits on clk.
func waitTicker(t testing.TB, clk *testingclock.FakeClock) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return clk.Waiters() >= 1, nil
	}); err != nil {
		t.Fatal("the store's bookmark ticker does not wait on the clock")
	}
}

// step moves clk by d and waits until the store's bookmark ticker has handled the tick.
func step(t testing.TB, s *ResourceStore, clk *testingclock.FakeClock, d time.Duration) {
	t.Helper()
	clk.Step(d)
	waitBookmarksSent(t, s, clk.Now())
}

// waitBookmarksSent waits until the store's bookmark ticker has handled the watchers due at
// now (sendBookmarks moves every due watcher to its next bucket, whether it sends a bookmark
// or not).
func waitBookmarksSent(t testing.TB, s *ResourceStore, now time.Time) {
	t.Helper()
	nowKey := now.UnixNano() / int64(s.bookmarks.granularity)
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		s.bookmarks.mu.Lock()
		defer s.bookmarks.mu.Unlock()
		for k := range s.bookmarks.due {
			if k <= nowKey {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatal("the bookmark ticker did not handle the due watchers")
	}
}

// waitWaiters waits until n callers wait for a change of the store (waitUntil).
func waitWaiters(t testing.TB, s *ResourceStore, n int) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return s.waiters == n, nil
	}); err != nil {
		t.Fatalf("%d callers do not wait for the store", n)
	}
}

func TestWaitForResourceVersion(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 10)
	if err := s.WaitForResourceVersion(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.WaitForResourceVersion(ctx, 11); err != context.DeadlineExceeded {
		t.Fatalf("got %v", err)
	}
	// A wait for 12 is woken by 11 and keeps waiting: it returns with the store at 12.
	type result struct {
		err error
		rv  uint64
	}
	returned := make(chan result, 1)
	go func() {
		err := s.WaitForResourceVersion(context.Background(), 12)
		returned <- result{err, s.ResourceVersion()}
	}()
	waitWaiters(t, s, 1)
	mustAdd(t, s, cm("ns", "a", 11, nil))
	s.UpdateResourceVersion("12")
	if r := <-returned; r.err != nil || r.rv < 12 {
		t.Fatalf("WaitForResourceVersion(12) returned %v with the store at %d", r.err, r.rv)
	}
	errc := make(chan error)
	go func() { errc <- s.WaitForResourceVersion(context.Background(), 100) }()
	waitWaiters(t, s, 1)
	s.Close()
	if err := <-errc; !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("after close: %v", err)
	}
}

func TestWatchWaitsForSync(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	got := make(chan watch.Interface)
	go func() {
		w, err := s.Watch(context.Background(), "east", WatchOptions{InitialEvents: true, InitialEventsEndBookmark: true})
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	waitWaiters(t, s, 1) // the watch waits for the first sync
	if s.HasSynced() {
		t.Fatal("synced")
	}
	mustReplace(t, s, 5, cm("ns", "a", 3, locs("east")))
	w := <-got
	defer w.Stop()
	expect(t, w, "ADDED a@3", "BOOKMARK@5+end")

	s2 := newTestStore(t, StoreOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := s2.Watch(ctx, "east", WatchOptions{}); !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("unsynced watch: %v", err)
	}
}

func TestStopAndCloseReleaseEverything(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 1, cm("ns", "a", 1, locs("east")))
	before := goleak.IgnoreCurrent()

	var ws []watch.Interface
	for i := 0; i < 20; i++ {
		w, err := s.Watch(context.Background(), "east", WatchOptions{InitialEvents: i%2 == 0, AllowBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wctx, err := s.Watch(ctx, "west", WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Stop is idempotent, also concurrently.
	for _, w := range ws[:10] {
		go w.Stop()
		w.Stop()
		w.Stop()
		expectClosed(t, w)
	}
	cancel()
	expectClosed(t, wctx)
	if st := s.Locations(); st["east"].Watchers != 10 || st["west"].Watchers != 0 {
		t.Fatalf("watchers %+v", st)
	}
	if _, ok := s.Locations()["west"]; ok {
		t.Fatalf("west listed without objects or watchers")
	}
	s.Close()
	for _, w := range ws[10:] {
		expectClosed(t, w)
		w.Stop()
	}
	if _, err := s.Watch(context.Background(), "east", WatchOptions{}); !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("watch on closed store: %v", err)
	}
	goleak.VerifyNone(t, before)
}

// TestEventObjectsShared checks that all watchers get the same *Object for one event (so the
// apiserver encodes it once), including the DELETED object built for a location change.
func TestEventObjectsShared(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 1, cm("ns", "a", 1, locs("east")))
	w1 := mustWatch(t, s, "east", WatchOptions{})
	w2 := mustWatch(t, s, "east", WatchOptions{})
	mustUpdate(t, s, cm("ns", "a", 2, locs("east")))
	if a, b := next(t, w1).Object, next(t, w2).Object; a != b {
		t.Fatalf("MODIFIED objects differ")
	}
	mustUpdate(t, s, cm("ns", "a", 3, locs("west")))
	a, b := next(t, w1), next(t, w2)
	if a.Type != watch.Deleted || a.Object != b.Object {
		t.Fatalf("DELETED objects differ")
	}
	// A resumed watch gets the same DELETED object from the history.
	r := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 2})
	if c := next(t, r); c.Object != a.Object {
		t.Fatalf("replayed DELETED object differs")
	}
}
