package cache

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	testingclock "k8s.io/utils/clock/testing"
)

// locationEntries returns the names of the store's location entries, sorted.
func locationEntries(s *ResourceStore) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.locs))
	for name := range s.locs {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// freshNames returns n location names never used before in the test (prefix-i-j).
func freshNames(prefix string, round, n int) []string {
	out := make([]string, n)
	for j := range out {
		out[j] = fmt.Sprintf("%s-%d-%d", prefix, round, j)
	}
	return out
}

// TestLocationEntriesFreed: a location entry is freed as soon as it holds no
// objects and no watchers, so a churn of fresh names in annotations or URLs leaves nothing.
func TestLocationEntriesFreed(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 1, cm("ns", "a", 1, locs("east")))
	rv := uint64(1)
	for round := 0; round < 20; round++ {
		rv++
		mustUpdate(t, s, cm("ns", "a", rv, append(freshNames("churn", round, 200), "east")))
	}
	rv++
	mustUpdate(t, s, cm("ns", "a", rv, locs("east")))
	if got := locationEntries(s); fmt.Sprint(got) != "[east]" {
		t.Fatalf("after churn: %d entries %.200v, want [east]", len(got), got)
	}

	// A watch on a fresh name (from a URL) holds its entry only while it is open.
	w := mustWatch(t, s, "from-a-url", WatchOptions{})
	if got := locationEntries(s); fmt.Sprint(got) != "[east from-a-url]" {
		t.Fatalf("with a watcher: %v", got)
	}
	w.Stop()
	expectClosed(t, w)
	ctx, cancel := context.WithCancel(context.Background())
	w2, err := s.Watch(ctx, "other-url", WatchOptions{InitialEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	expectClosed(t, w2)
	waitFor(t, "the watchers' entries to be freed", func() bool { return fmt.Sprint(locationEntries(s)) == "[east]" })

	// A location whose last object leaves is freed, and its watchers still see the DELETED.
	w3 := mustWatch(t, s, "east", WatchOptions{})
	rv++
	mustUpdate(t, s, cm("ns", "a", rv, locs("west")))
	expect(t, w3, fmt.Sprintf("DELETED a@%d", rv))
	w3.Stop()
	expectClosed(t, w3)
	waitFor(t, "east's entry to be freed", func() bool { return fmt.Sprint(locationEntries(s)) == "[west]" })
	rv++
	mustDelete(t, s, cm("ns", "a", rv, locs("west")))
	if got := locationEntries(s); len(got) != 0 {
		t.Fatalf("after the last object left: %v", got)
	}
	// Lists and gets of unknown locations create no entries.
	if _, err := s.List("never-seen", ListOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Get("never-seen-2", "ns", "a")
	if got := locationEntries(s); len(got) != 0 {
		t.Fatalf("after reads of unknown locations: %v", got)
	}
}

// TestFreedLocationContinue checks that freeing an entry never turns a continue page into a
// wrong answer: served from the snapshot while it lasts, then 410, never the empty live state.
func TestFreedLocationContinue(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	s := newTestStore(t, StoreOptions{Clock: clk, SnapshotTTL: time.Minute})
	mustReplace(t, s, 10, cm("ns", "a", 1, locs("east")), cm("ns", "b", 2, locs("east")), cm("ns", "c", 3, locs("east")))
	p1, err := s.List("east", ListOptions{Limit: 1})
	if err != nil || !p1.More {
		t.Fatalf("page 1: %v more=%v", err, p1.More)
	}
	for i, n := range []string{"a", "b", "c"} {
		mustDelete(t, s, cm("ns", n, uint64(11+i), locs("east")))
	}
	if got := locationEntries(s); len(got) != 0 {
		t.Fatalf("entries after the last object left: %v", got)
	}
	p2, err := s.List("east", ListOptions{Limit: 5, After: p1.Items[0].Key(), SnapshotRV: p1.ResourceVersion})
	if err != nil || names(p2.Items) != "b,c" {
		t.Fatalf("continue from the snapshot: %v %v", names(p2.Items), err)
	}
	clk.Step(2 * time.Minute)
	if _, err := s.List("east", ListOptions{Limit: 5, After: p1.Items[0].Key(), SnapshotRV: p1.ResourceVersion}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("continue after the snapshot expired: got %v, want 410", err)
	}
	s.snaps.mu.Lock()
	left := len(s.snaps.byLoc)
	s.snaps.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d locations still hold expired snapshots", left)
	}
}

// TestLocationChurnHeap on a real ResourceStore: after 80
// patches of one object with 1,000 fresh location names each (and watches opened on fresh names,
// as URLs would), the heap after a GC returns to within 4 MiB of its baseline (the bound once asked
// for 10% of it, when the 2,000 stored objects were decoded trees; kept as bytes they are 40%
// smaller, and the bound is absolute: a leak grows the heap by about 150 MB). The
// history is kept small (100 events) and 300 later writes push the churned object versions out
// of it, as a busy source would (the history is bounded by HistorySize either way).
func TestLocationChurnHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("heap measurement")
	}
	s := newTestStore(t, StoreOptions{HistorySize: 100})
	var objs []interface{}
	for i := 0; i < 2000; i++ {
		objs = append(objs, cm("ns", fmt.Sprintf("o%05d", i), uint64(i+1), locs(fmt.Sprintf("loc-%02d", i%50)), "d:k=some data of a realistic size for a config map"))
	}
	if err := s.Replace(objs, "3000"); err != nil {
		t.Fatal(err)
	}
	objs = nil
	rv := uint64(3000)
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	base := heap()
	for round := 0; round < 80; round++ {
		rv++
		mustUpdate(t, s, cm("ns", "churned", rv, freshNames("fresh", round, 1000)))
		ctx, cancel := context.WithCancel(context.Background())
		for j := 0; j < 10; j++ {
			if _, err := s.Watch(ctx, fmt.Sprintf("url-%d-%d", round, j), WatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
	}
	// Push the churned versions out of the bounded history (and its backing array), as later
	// writes would.
	for i := 0; i < 300; i++ {
		rv++
		mustUpdate(t, s, cm("ns", "o00000", rv, locs("loc-00")))
	}
	rv++
	mustDelete(t, s, cm("ns", "churned", rv, nil))
	waitFor(t, "the churned watches to end", func() bool {
		for _, st := range s.Locations() {
			if st.Watchers > 0 {
				return false
			}
		}
		return true
	})
	after := heap()
	t.Logf("heap in use: baseline %d bytes, after churn %d bytes (%+.1f%%)", base, after, 100*(float64(after)-float64(base))/float64(base))
	// An absolute bound: the baseline is the 2000 stored objects, whose size says nothing
	// about the churn. 80,000 leaked location indexes (releaseLocked not releasing) grow the
	// heap by about 150 MB here; what remains legitimately (the bounded history, the deleted
	// object's final state) is about 1.4 MB.
	const maxGrowth = 4 << 20
	if after > base+maxGrowth {
		t.Fatalf("heap after churn %d bytes, more than %d bytes above the baseline %d bytes", after, maxGrowth, base)
	}
}
