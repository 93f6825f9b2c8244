package cache

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"weak"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	testingclock "k8s.io/utils/clock/testing"
)

// resumeErr returns the error of a watch of location resumed from rv (nil when it starts).
func resumeErr(t *testing.T, s *ResourceStore, location string, rv uint64) error {
	t.Helper()
	w, err := s.Watch(context.Background(), location, WatchOptions{ResourceVersion: rv})
	if err == nil {
		w.Stop()
	}
	return err
}

// big returns data of n bytes for a ConfigMap ("d:data=..." for cm).
func big(n int) string { return "d:data=" + strings.Repeat("x", n) }

// TestHistoryAge (F3): an event older than HistoryMaxAge is dropped, on the next write or by the
// periodic sweep (trimHistory), and a resume from before it answers 410 as from before the
// count bound.
func TestHistoryAge(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	s := newTestStore(t, StoreOptions{Clock: clk, HistoryMaxAge: time.Minute})
	mustReplace(t, s, 10)
	mustAdd(t, s, cm("ns", "o", 11, locs("east")))
	clk.Step(30 * time.Second)
	mustUpdate(t, s, cm("ns", "o", 12, locs("east")))
	expect(t, mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10}), "ADDED o@11", "MODIFIED o@12")

	clk.Step(31 * time.Second) // 11 is 61 s old, 12 is 31 s old
	s.trimHistory()
	if err := resumeErr(t, s, "east", 10); !apierrors.IsResourceExpired(err) {
		t.Fatalf("resume from before an event older than the age bound: %v, want 410", err)
	}
	expect(t, mustWatch(t, s, "east", WatchOptions{ResourceVersion: 11}), "MODIFIED o@12")
	clk.Step(30 * time.Second)
	mustUpdate(t, s, cm("ns", "o", 13, locs("east"))) // trims 12 on the way
	if err := resumeErr(t, s, "east", 11); !apierrors.IsResourceExpired(err) {
		t.Fatalf("resume from 11 after 12 aged out: %v, want 410", err)
	}
	expect(t, mustWatch(t, s, "east", WatchOptions{ResourceVersion: 12}), "MODIFIED o@13")
}

// TestHistoryMemoryBudget (F3): the histories sharing a budget keep together at most about the
// budget; the resource that writes large versions drops its own oldest events, and a resource
// that holds less than its fair share keeps its history.
func TestHistoryMemoryBudget(t *testing.T) {
	budget := NewHistoryBudget(200_000)
	heavy := newTestStore(t, StoreOptions{HistoryBudget: budget})
	light := newTestStore(t, StoreOptions{HistoryBudget: budget})
	mustReplace(t, heavy, 10)
	mustReplace(t, light, 10)
	for rv := uint64(11); rv <= 20; rv++ {
		mustAdd(t, light, cm("ns", "small", rv, locs("east"), "d:v=1"))
	}
	// 100 versions of a 20 KB object: 2 MB superseded, ten times the budget.
	for rv := uint64(21); rv <= 120; rv++ {
		mustAdd(t, heavy, cm("ns", "large", rv, locs("east"), big(20_000)))
		if used := budget.Used(); used > 200_000+30_000 {
			t.Fatalf("after the write at %d the histories hold %d bytes, over the budget of 200000 by more than one version", rv, used)
		}
	}
	if err := resumeErr(t, heavy, "east", 30); !apierrors.IsResourceExpired(err) {
		t.Errorf("resume of the heavy resource from long ago: %v, want 410", err)
	}
	if err := resumeErr(t, heavy, "east", 115); err != nil {
		t.Errorf("resume of the heavy resource from a recent resourceVersion: %v", err)
	}
	w := mustWatch(t, light, "east", WatchOptions{ResourceVersion: 10})
	want := []string{"ADDED small@11"}
	for rv := 12; rv <= 20; rv++ {
		want = append(want, "MODIFIED small@"+strconv.Itoa(rv))
	}
	expect(t, w, want...)

	// Closing a store gives its bytes back.
	heavy.Close()
	if used := budget.Used(); used > 50_000 {
		t.Errorf("after the heavy store closed the histories hold %d bytes", used)
	}
}

// TestHistoryKeepsNoCopiesOfLargeVersions (F3): a superseded version larger than
// HistoryMaxObjectSize is not kept; a resume that would have to send it answers 410, while a
// resume that needs only newer versions, or a location the object is not in, works.
func TestHistoryKeepsNoCopiesOfLargeVersions(t *testing.T) {
	budget := NewHistoryBudget(1 << 30)
	s := newTestStore(t, StoreOptions{HistoryMaxObjectSize: 10_000, HistoryBudget: budget})
	mustReplace(t, s, 10)
	mustAdd(t, s, cm("ns", "small", 11, locs("west"), "d:v=1"))
	for rv := uint64(12); rv <= 21; rv++ {
		mustAdd(t, s, cm("ns", "large", rv, locs("east"), big(50_000)))
	}
	mustUpdate(t, s, cm("ns", "small", 22, locs("west"), "d:v=2"))
	if used := budget.Used(); used > 10*eventOverhead+10_000 {
		t.Errorf("the history holds %d bytes after 10 writes of a 50 KB object, want no copies", used)
	}
	// east needs the versions 12 to 20, which are gone.
	err := resumeErr(t, s, "east", 11)
	if !apierrors.IsResourceExpired(err) || !strings.Contains(err.Error(), "large") {
		t.Errorf("resume of east from before the large versions: %v, want 410 naming the large object", err)
	}
	// From 20, east needs only 21, the current version.
	expect(t, mustWatch(t, s, "east", WatchOptions{ResourceVersion: 20}), "MODIFIED large@21")
	// west never had the large object: its resume from 10 works.
	expect(t, mustWatch(t, s, "west", WatchOptions{ResourceVersion: 10}), "ADDED small@11", "MODIFIED small@22")
	// The deletion of a large object keeps no copy of its final state either.
	mustDelete(t, s, cm("ns", "large", 23, locs("east"), big(50_000)))
	if err := resumeErr(t, s, "east", 21); !apierrors.IsResourceExpired(err) {
		t.Errorf("resume of east from before the deletion of the large object: %v, want 410", err)
	}
	expectNothing(t, mustWatch(t, s, "east", WatchOptions{ResourceVersion: 23}))
}

// TestHistoryReleasesEvictedEvents (F3): the events a memory budget evicts become garbage
// soon, not only when the history's array is next reallocated: after 300 versions of a 20 KB
// object under a budget that keeps about 10, the evicted events still reachable cost at most
// an eighth of the kept ones (and one more). Without the compaction in cut, the array's dead
// prefix kept up to as many evicted events as live ones: a 64 MiB budget held 130 MiB.
func TestHistoryReleasesEvictedEvents(t *testing.T) {
	budget := NewHistoryBudget(200_000)
	s := newTestStore(t, StoreOptions{HistoryBudget: budget})
	mustReplace(t, s, 10)
	var seen []weak.Pointer[event]
	for rv := uint64(11); rv <= 310; rv++ {
		mustAdd(t, s, cm("ns", "large", rv, locs("east"), big(20_000)))
		s.mu.RLock()
		if n := len(s.history.events); n > 0 {
			seen = append(seen, weak.Make(s.history.events[n-1]))
		}
		s.mu.RUnlock()
	}
	runtime.GC()
	s.mu.RLock()
	live := map[*event]bool{}
	var liveCost int64
	for _, e := range s.history.events {
		live[e] = true
		liveCost += e.cost
	}
	s.mu.RUnlock()
	var retained, retainedCost int64
	for _, p := range seen {
		if e := p.Value(); e != nil && !live[e] {
			retained++
			retainedCost += e.cost
		}
	}
	t.Logf("%d events kept (%d bytes), %d evicted ones still reachable (%d bytes)", len(live), liveCost, retained, retainedCost)
	if maxCost := liveCost/8 + 30_000; retainedCost > maxCost {
		t.Errorf("%d evicted events (%d bytes) are still reachable beside %d kept ones (%d bytes); want at most %d bytes", retained, retainedCost, len(live), liveCost, maxCost)
	}
}
