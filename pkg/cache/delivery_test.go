package cache

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// TestWatchersKeepNoGoroutineWhileConsumersKeepUp: a watch has a goroutine of its own only
// while it emits its initial events or its consumer lags; 200 watches whose consumers keep up
// leave the number of goroutines where it was (before, every watch kept one).
func TestWatchersKeepNoGoroutineWhileConsumersKeepUp(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 10, cm("ns", "a", 5, locs("east")))
	before := goleak.IgnoreCurrent()
	var initial, resumed []watch.Interface
	for i := 0; i < 100; i++ {
		w := mustWatch(t, s, "east", WatchOptions{InitialEvents: true})
		if got := ev(next(t, w)); got != "ADDED a@5" {
			t.Fatalf("initial event %s", got)
		}
		initial = append(initial, w)
		resumed = append(resumed, mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10}))
	}
	goleak.VerifyNone(t, before)
	for i := 0; i < 3; i++ {
		mustAdd(t, s, cm("ns", name(i), uint64(11+i), locs("east")))
		want := fmt.Sprintf("ADDED %s@%d", name(i), 11+i)
		for _, w := range append(initial, resumed...) {
			if got := ev(next(t, w)); got != want {
				t.Fatalf("got %s, want %s", got, want)
			}
		}
	}
	goleak.VerifyNone(t, before)
}

// TestLaggingConsumerGetsEverythingInOrder: events that do not fit the result channel wait for
// the consumer in order, behind the initial events, and once it caught up they go straight to
// the channel again, with no goroutine left behind.
func TestLaggingConsumerGetsEverythingInOrder(t *testing.T) {
	s := newTestStore(t, StoreOptions{WatcherBufferSize: 100})
	var objects []string
	for i := 0; i < 20; i++ {
		objects = append(objects, name(i))
	}
	initial := make([]string, 0, 20)
	var items []*unstructured.Unstructured
	for i, n := range objects {
		items = append(items, cm("ns", n, uint64(1+i), locs("east")))
		initial = append(initial, fmt.Sprintf("ADDED %s@%d", n, 1+i))
	}
	mustReplace(t, s, 20, items...)
	before := goleak.IgnoreCurrent()
	w := mustWatch(t, s, "east", WatchOptions{InitialEvents: true})
	// The consumer reads nothing while 40 events arrive: more than the result channel holds.
	var want []string
	want = append(want, initial...)
	for i := 0; i < 40; i++ {
		mustAdd(t, s, cm("other", name(i), uint64(21+i), locs("east")))
		want = append(want, fmt.Sprintf("ADDED %s@%d", name(i), 21+i))
	}
	var got []string
	for range want {
		got = append(got, ev(next(t, w)))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events:\n got: %v\nwant: %v", got, want)
	}
	goleak.VerifyNone(t, before)
	mustAdd(t, s, cm("other", "late", 61, locs("east")))
	expect(t, w, "ADDED late@61")
}

// TestEventsRenderedOutsideTheLock: an event whose object the location sees rendered (here its
// own status record) goes through the pump, which renders it; the consumer gets the location's
// view, not the source's object.
func TestEventsRenderedOutsideTheLock(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 10)
	east := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10})
	west := mustWatch(t, s, "west", WatchOptions{ResourceVersion: 10})
	u := cm("ns", "s", 11, locs("east", "west"),
		"a:"+contract.StatusPolicyAnnotation+"="+contract.StatusPolicyReflect,
		"a:"+contract.StatusRecordAnnotationPrefix+`east={"phase":"east"}`)
	u.Object["status"] = map[string]interface{}{"phase": "source"}
	mustAdd(t, s, u)
	for _, c := range []struct {
		w    watch.Interface
		want interface{}
	}{
		{east, map[string]interface{}{"phase": "east"}},
		{west, nil},
	} {
		e := next(t, c.w)
		got := e.Object.(*Object).Unstructured().Object["status"]
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: .status %v, want %v", ev(e), got, c.want)
		}
	}
}

// TestBookmarksFollowEachWatchersStart: a watcher's periodic bookmarks come an interval after
// its own start, not at one tick for all the store's watchers, so watchers opened at different
// times do not get theirs in one burst.
func TestBookmarksFollowEachWatchersStart(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	s := newTestStore(t, StoreOptions{Clock: clk, BookmarkInterval: 3 * time.Second})
	mustReplace(t, s, 10)
	first := mustWatch(t, s, "east", WatchOptions{AllowBookmarks: true})
	waitTicker(t, clk)
	step(t, s, clk, time.Second)
	second := mustWatch(t, s, "west", WatchOptions{AllowBookmarks: true})
	s.UpdateResourceVersion("15")
	step(t, s, clk, time.Second)
	expectNothing(t, first)
	step(t, s, clk, time.Second) // 3 s after the first watcher's start
	expect(t, first, "BOOKMARK@15")
	expectNothing(t, second)
	step(t, s, clk, time.Second) // 3 s after the second's
	expect(t, second, "BOOKMARK@15")
	expectNothing(t, first)
	s.UpdateResourceVersion("16")
	step(t, s, clk, 2*time.Second) // 3 s after the first one's bookmark
	expect(t, first, "BOOKMARK@16")
	expectNothing(t, second)
}
