package view

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
)

// The tests of this file call the view's resource storage through the interfaces
// k8s.io/apiserver's GET, LIST and WATCH handlers call (rest.Getter, rest.Lister, rest.Watcher)
// and check what a client of the view would get, against a real cache.ResourceStore.

// sourceAt20 is the source's first list at resourceVersion 20: three objects of east (one of
// them also west's), one of west only and one assigned to no location.
func sourceAt20() []*unstructured.Unstructured {
	return []*unstructured.Unstructured{
		cm("team-a", "a1", 10, "1", "east"),
		cm("team-a", "a2", 11, "1", "east", "west"),
		cm("team-b", "b1", 12, "1", "east"),
		cm("team-a", "w1", 13, "1", "west"),
		cm("team-a", "n1", 14, "1"),
	}
}

var eastAt20 = []string{"team-a/a1=1@10", "team-a/a2=1@11", "team-b/b1=1@12"}

func TestGet(t *testing.T) {
	type getCase struct {
		name     string
		location string
		ns, obj  string
		rv       string
		// prepare runs before the Get (e.g. a source write that reaches the cache later).
		prepare func(f *viewFixture)
		want    string
		code    int
	}
	a1At21 := cm("team-a", "a1", 21, "2", "east")
	cases := []getCase{
		{name: "resourceVersion 0 reads the cache", location: "east", ns: "team-a", obj: "a1", rv: "0", want: "team-a/a1=1@10"},
		{name: "shared object", location: "west", ns: "team-a", obj: "a2", rv: "0", want: "team-a/a2=1@11"},
		{name: "another location's object is 404", location: "east", ns: "team-a", obj: "w1", rv: "0", code: http.StatusNotFound},
		{name: "an unassigned object is 404", location: "east", ns: "team-a", obj: "n1", rv: "0", code: http.StatusNotFound},
		{name: "an object in another namespace is 404", location: "east", ns: "team-b", obj: "a1", rv: "0", code: http.StatusNotFound},
		{name: "an unknown location sees nothing", location: "north", ns: "team-a", obj: "a1", rv: "0", code: http.StatusNotFound},
		{name: "resourceVersion 0 does not wait", location: "east", ns: "team-a", obj: "a1", rv: "0",
			prepare: func(f *viewFixture) { f.source.set(a1At21) }, want: "team-a/a1=1@10"},

		{name: "consistent read waits for the source's version", location: "east", ns: "team-a", obj: "a1", rv: "",
			prepare: func(f *viewFixture) { f.source.set(a1At21); f.writeLater(50*time.Millisecond, a1At21) }, want: "team-a/a1=2@21"},
		{name: "consistent read answers 504 when the cache does not catch up", location: "east", ns: "team-a", obj: "a1", rv: "",
			prepare: func(f *viewFixture) { f.source.set(a1At21) }, code: http.StatusGatewayTimeout},
		{name: "consistent read of another location's object is 404", location: "east", ns: "team-a", obj: "w1", rv: "", code: http.StatusNotFound},
		{name: "consistent read of an object the source lacks is 404", location: "east", ns: "team-a", obj: "nothing", rv: "", code: http.StatusNotFound},
		{name: "consistent read with the source unreachable is 503", location: "east", ns: "team-a", obj: "a1", rv: "",
			prepare: func(f *viewFixture) { f.source.err = errors.New("dial tcp: connection refused") }, code: http.StatusServiceUnavailable},

		{name: "resourceVersion N waits for N", location: "east", ns: "team-a", obj: "a1", rv: "21",
			prepare: func(f *viewFixture) { f.writeLater(50*time.Millisecond, a1At21) }, want: "team-a/a1=2@21"},
		{name: "resourceVersion N the cache never reaches is 504", location: "east", ns: "team-a", obj: "a1", rv: "21", code: http.StatusGatewayTimeout},
		{name: "resourceVersion older than the cache reads the cache", location: "east", ns: "team-a", obj: "a1", rv: "15", want: "team-a/a1=1@10"},
		{name: "resourceVersion N of another location's object is 404", location: "east", ns: "team-a", obj: "w1", rv: "20", code: http.StatusNotFound},
		{name: "a resourceVersion that is not a number is 400", location: "east", ns: "team-a", obj: "a1", rv: "abc", code: http.StatusBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newViewFixture(t, fixtureOptions{}, 20, sourceAt20()...)
			if c.prepare != nil {
				c.prepare(f)
			}
			var getter rest.Getter = f.storage
			obj, err := getter.Get(viewCtx(c.location, c.ns), c.obj, &metav1.GetOptions{ResourceVersion: c.rv})
			if c.code != 0 {
				expectCode(t, "Get", err, c.code)
				return
			}
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got := describe(t, obj); got != c.want {
				t.Errorf("Get returned %s, want %s", got, c.want)
			}
		})
	}
}

func TestList(t *testing.T) {
	type listCase struct {
		name     string
		location string
		ns       string
		opts     metainternalversion.ListOptions
		prepare  func(f *viewFixture)
		want     []string
		wantRV   string
		code     int
	}
	c30 := cm("team-c", "c30", 30, "1", "east")
	exact := metav1.ResourceVersionMatchExact
	cases := []listCase{
		{name: "resourceVersion 0: the location's objects in key order", location: "east", opts: metainternalversion.ListOptions{ResourceVersion: "0"},
			want: eastAt20, wantRV: "20"},
		{name: "another location", location: "west", opts: metainternalversion.ListOptions{ResourceVersion: "0"},
			want: []string{"team-a/a2=1@11", "team-a/w1=1@13"}, wantRV: "20"},
		{name: "an unknown location is empty", location: "north", opts: metainternalversion.ListOptions{ResourceVersion: "0"},
			want: []string{}, wantRV: "20"},
		{name: "one namespace", location: "east", ns: "team-a", opts: metainternalversion.ListOptions{ResourceVersion: "0"},
			want: []string{"team-a/a1=1@10", "team-a/a2=1@11"}, wantRV: "20"},
		{name: "label selector", location: "east", opts: metainternalversion.ListOptions{ResourceVersion: "0", LabelSelector: labels.SelectorFromSet(labels.Set{"tier": "web"})},
			want: []string{"team-b/b1=1@12"}, wantRV: "20"},
		{name: "field selector on metadata.name", location: "east", opts: metainternalversion.ListOptions{ResourceVersion: "0", FieldSelector: fields.OneTermEqualSelector("metadata.name", "a2")},
			want: []string{"team-a/a2=1@11"}, wantRV: "20"},
		{name: "field selector on metadata.namespace", location: "east", opts: metainternalversion.ListOptions{ResourceVersion: "0", FieldSelector: fields.OneTermEqualSelector("metadata.namespace", "team-b")},
			want: []string{"team-b/b1=1@12"}, wantRV: "20"},
		{name: "resourceVersion 0 does not wait for the source", location: "east", opts: metainternalversion.ListOptions{ResourceVersion: "0"},
			prepare: func(f *viewFixture) { f.source.set(c30) }, want: eastAt20, wantRV: "20"},

		{name: "consistent list waits until the cache reached the source's resourceVersion", location: "east", opts: metainternalversion.ListOptions{},
			prepare: func(f *viewFixture) { f.source.set(c30); f.writeLater(50*time.Millisecond, c30) },
			want:    append(append([]string{}, eastAt20...), "team-c/c30=1@30"), wantRV: "30"},
		{name: "consistent list the cache cannot prove is served at the cache's resourceVersion", location: "east", opts: metainternalversion.ListOptions{},
			prepare: func(f *viewFixture) { f.source.set(c30) }, want: eastAt20, wantRV: "20"},
		{name: "consistent list with the source unreachable is 503", location: "east", opts: metainternalversion.ListOptions{},
			prepare: func(f *viewFixture) { f.source.err = errors.New("dial tcp: connection refused") }, code: http.StatusServiceUnavailable},

		{name: "resourceVersion N waits for N", location: "east", opts: metainternalversion.ListOptions{ResourceVersion: "30"},
			prepare: func(f *viewFixture) { f.writeLater(50*time.Millisecond, c30) },
			want:    append(append([]string{}, eastAt20...), "team-c/c30=1@30"), wantRV: "30"},
		{name: "resourceVersion N with NotOlderThan waits for N", location: "east", opts: metainternalversion.ListOptions{ResourceVersion: "30", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan},
			prepare: func(f *viewFixture) { f.writeLater(50*time.Millisecond, c30) },
			want:    append(append([]string{}, eastAt20...), "team-c/c30=1@30"), wantRV: "30"},
		{name: "resourceVersion N older than the cache serves the cache", location: "east", opts: metainternalversion.ListOptions{ResourceVersion: "15", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan},
			want: eastAt20, wantRV: "20"},
		{name: "resourceVersion N the cache never reaches is 504", location: "east", opts: metainternalversion.ListOptions{ResourceVersion: "30"}, code: http.StatusGatewayTimeout},
		{name: "a resourceVersion that is not a number is 400", location: "east", opts: metainternalversion.ListOptions{ResourceVersion: "x1"}, code: http.StatusBadRequest},

		{name: "Exact at the cache's resourceVersion", location: "east", opts: metainternalversion.ListOptions{ResourceVersion: "20", ResourceVersionMatch: exact},
			want: eastAt20, wantRV: "20"},
		{name: "Exact at a past resourceVersion the location has not changed since", location: "east", opts: metainternalversion.ListOptions{ResourceVersion: "20", ResourceVersionMatch: exact},
			prepare: func(f *viewFixture) { f.write(cm("team-a", "w1", 21, "2", "west")) }, want: eastAt20, wantRV: "20"},
		{name: "Exact at a past resourceVersion the location changed since is 410", location: "east", opts: metainternalversion.ListOptions{ResourceVersion: "20", ResourceVersionMatch: exact},
			prepare: func(f *viewFixture) { f.write(cm("team-a", "a1", 21, "2", "east")) }, code: http.StatusGone},
		{name: "Exact at a future resourceVersion waits for it", location: "east", opts: metainternalversion.ListOptions{ResourceVersion: "30", ResourceVersionMatch: exact},
			prepare: func(f *viewFixture) { f.writeLater(50*time.Millisecond, c30) },
			want:    append(append([]string{}, eastAt20...), "team-c/c30=1@30"), wantRV: "30"},
		{name: "Exact at a resourceVersion the cache never reaches is 504", location: "east", opts: metainternalversion.ListOptions{ResourceVersion: "30", ResourceVersionMatch: exact}, code: http.StatusGatewayTimeout},
		{name: "Exact with resourceVersion 0 is 400", location: "east", opts: metainternalversion.ListOptions{ResourceVersion: "0", ResourceVersionMatch: exact}, code: http.StatusBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := sourceAt20()
			withLabels(objs[2], map[string]string{"tier": "web"})
			f := newViewFixture(t, fixtureOptions{}, 20, objs...)
			if c.prepare != nil {
				c.prepare(f)
			}
			var lister rest.Lister = f.storage
			obj, err := lister.List(viewCtx(c.location, c.ns), &c.opts)
			if c.code != 0 {
				expectCode(t, "List", err, c.code)
				return
			}
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			got, rv := listed(t, obj)
			if strings.Join(got, " ") != strings.Join(c.want, " ") || rv != c.wantRV {
				t.Errorf("List returned %v at resourceVersion %s, want %v at %s", got, rv, c.want, c.wantRV)
			}
		})
	}
}

// TestListExactFromSnapshot: a paged list keeps the state of its first page, and an Exact list
// at that resourceVersion is served from it after the location changed.
func TestListExactFromSnapshot(t *testing.T) {
	f := newViewFixture(t, fixtureOptions{}, 20, sourceAt20()...)
	ctx := viewCtx("east", "")
	if _, err := f.storage.List(ctx, &metainternalversion.ListOptions{ResourceVersion: "0", Limit: 1}); err != nil {
		t.Fatal(err)
	}
	f.write(cm("team-a", "a1", 21, "2", "east"))
	obj, err := f.storage.List(ctx, &metainternalversion.ListOptions{ResourceVersion: "20", ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if err != nil {
		t.Fatalf("Exact list at the snapshot's resourceVersion: %v", err)
	}
	if got, rv := listed(t, obj); strings.Join(got, " ") != strings.Join(eastAt20, " ") || rv != "20" {
		t.Errorf("Exact list at 20 returned %v at %s, want the state at 20 %v", got, rv, eastAt20)
	}
}

// TestListPaging: limit/continue pages show the state of the first page, whatever changes
// meanwhile; a continue token whose state is gone is 410; a malformed token is 400.
func TestListPaging(t *testing.T) {
	ctx := viewCtx("east", "")
	var lister rest.Lister

	t.Run("pages are consistent with the first", func(t *testing.T) {
		f := newViewFixture(t, fixtureOptions{}, 20, sourceAt20()...)
		lister = f.storage
		obj, err := lister.List(ctx, &metainternalversion.ListOptions{ResourceVersion: "0", Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		got, rv := listed(t, obj)
		token := obj.(*List).Continue
		if strings.Join(got, " ") != "team-a/a1=1@10 team-a/a2=1@11" || rv != "20" || token == "" {
			t.Fatalf("first page: %v at %s, continue %q", got, rv, token)
		}
		// Changes after the first page: a changed item of the next page, a new one, a removed one.
		f.write(cm("team-b", "b1", 21, "2", "east"))
		f.write(cm("team-c", "c22", 22, "1", "east"))
		f.remove(cm("team-a", "a2", 23, "1", "east", "west"))
		obj, err = lister.List(ctx, &metainternalversion.ListOptions{Continue: token, Limit: 2})
		if err != nil {
			t.Fatalf("second page: %v", err)
		}
		got, rv = listed(t, obj)
		if strings.Join(got, " ") != "team-b/b1=1@12" || rv != "20" || obj.(*List).Continue != "" {
			t.Errorf("second page: %v at %s, continue %q; want [team-b/b1=1@12] at 20 and no continue", got, rv, obj.(*List).Continue)
		}
		// A new list sees the changes.
		obj, err = lister.List(ctx, &metainternalversion.ListOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		if got, rv := listed(t, obj); strings.Join(got, " ") != "team-a/a1=1@10 team-b/b1=2@21 team-c/c22=1@22" || rv != "23" {
			t.Errorf("a new list after the changes: %v at %s", got, rv)
		}
	})

	t.Run("an expired continue token is 410", func(t *testing.T) {
		f := newViewFixture(t, fixtureOptions{}, 20, sourceAt20()...)
		lister = f.storage
		obj, err := lister.List(ctx, &metainternalversion.ListOptions{ResourceVersion: "0", Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		token := obj.(*List).Continue
		f.write(cm("team-a", "a2", 21, "2", "east", "west"))
		f.clock.Step(cache.DefaultSnapshotTTL + time.Second)
		_, err = lister.List(ctx, &metainternalversion.ListOptions{Continue: token, Limit: 1})
		expectCode(t, "continue after the snapshot expired", err, http.StatusGone)
	})

	t.Run("a continue token within the snapshot's lifetime still works", func(t *testing.T) {
		f := newViewFixture(t, fixtureOptions{}, 20, sourceAt20()...)
		lister = f.storage
		obj, err := lister.List(ctx, &metainternalversion.ListOptions{ResourceVersion: "0", Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		token := obj.(*List).Continue
		f.write(cm("team-a", "a2", 21, "2", "east", "west"))
		f.clock.Step(cache.DefaultSnapshotTTL - time.Second)
		obj, err = lister.List(ctx, &metainternalversion.ListOptions{Continue: token})
		if err != nil {
			t.Fatalf("continue within the TTL: %v", err)
		}
		if got, _ := listed(t, obj); strings.Join(got, " ") != "team-a/a2=1@11 team-b/b1=1@12" {
			t.Errorf("continue within the TTL: %v", got)
		}
	})

	for _, bad := range []string{"not-a-token", "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MjB9"} {
		t.Run("malformed continue "+bad, func(t *testing.T) {
			f := newViewFixture(t, fixtureOptions{}, 20, sourceAt20()...)
			lister = f.storage
			_, err := lister.List(ctx, &metainternalversion.ListOptions{Continue: bad})
			expectCode(t, "List with continue "+bad, err, http.StatusBadRequest)
		})
	}
}

// changesAfter20 are source writes after the first list, each touching east differently.
func changesAfter20(f *viewFixture) {
	f.write(cm("team-a", "a1", 21, "2", "east"))         // MODIFIED
	f.write(cm("team-a", "w1", 22, "2", "west", "east")) // gains east: ADDED
	f.write(cm("team-a", "a2", 23, "2", "west"))         // loses east: DELETED
	f.write(cm("team-a", "n1", 24, "2"))                 // never east's: nothing
	f.remove(cm("team-b", "b1", 25, "1", "east"))        // deleted upstream: DELETED
}

// eventsOfChanges are east's events of changesAfter20. A DELETED carries the last state the
// location saw, at the deletion's resourceVersion (as kube-apiserver's watch cache).
var eventsOfChanges = []string{
	"MODIFIED team-a/a1=2@21",
	"ADDED team-a/w1=2@22",
	"DELETED team-a/a2=1@23",
	"DELETED team-b/b1=1@25",
}

func TestWatch(t *testing.T) {
	type watchCase struct {
		name string
		opts metainternalversion.ListOptions
		// before runs before the watch starts, during runs after it started.
		before, during func(f *viewFixture)
		// initial are the initial events (in any order), then events in order.
		initial, events []string
		code            int
		// historySize is the store's watch history (default: the cache's default).
		historySize int
	}
	c30 := cm("team-c", "c30", 30, "1", "east")
	initialAt20 := []string{"ADDED team-a/a1=1@10", "ADDED team-a/a2=1@11", "ADDED team-b/b1=1@12"}
	cases := []watchCase{
		{name: "resourceVersion 0: the current state as ADDED, then the changes", opts: metainternalversion.ListOptions{ResourceVersion: "0"},
			during: changesAfter20, initial: initialAt20, events: eventsOfChanges},
		{name: "resourceVersion \"\": the current state as ADDED, then the changes", opts: metainternalversion.ListOptions{},
			during: changesAfter20, initial: initialAt20, events: eventsOfChanges},
		{name: "resourceVersion \"\" waits for the source's resourceVersion", opts: metainternalversion.ListOptions{},
			before:  func(f *viewFixture) { f.source.set(c30); f.writeLater(50*time.Millisecond, c30) },
			initial: append(append([]string{}, initialAt20...), "ADDED team-c/c30=1@30")},
		{name: "resourceVersion \"\" with the source unreachable is 503", opts: metainternalversion.ListOptions{},
			before: func(f *viewFixture) { f.source.err = errors.New("dial tcp: connection refused") }, code: http.StatusServiceUnavailable},
		{name: "streaming list: initial events, the end bookmark, then the changes",
			opts:   metainternalversion.ListOptions{SendInitialEvents: yes(), AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan},
			during: changesAfter20, initial: initialAt20, events: append([]string{"BOOKMARK@20+end"}, eventsOfChanges...)},
		{name: "streaming list from resourceVersion N waits for N",
			opts:    metainternalversion.ListOptions{ResourceVersion: "30", SendInitialEvents: yes(), AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan},
			before:  func(f *viewFixture) { f.writeLater(50*time.Millisecond, c30) },
			initial: append(append([]string{}, initialAt20...), "ADDED team-c/c30=1@30"), events: []string{"BOOKMARK@30+end"}},
		{name: "streaming list from a resourceVersion the cache never reaches is 504",
			opts: metainternalversion.ListOptions{ResourceVersion: "30", SendInitialEvents: yes(), AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan},
			code: http.StatusGatewayTimeout},
		{name: "resourceVersion N: every change after N", opts: metainternalversion.ListOptions{ResourceVersion: "20"},
			before: changesAfter20, events: eventsOfChanges},
		{name: "resourceVersion N resumes in the middle", opts: metainternalversion.ListOptions{ResourceVersion: "22"},
			before: changesAfter20, events: eventsOfChanges[2:]},
		{name: "resourceVersion N: replayed and live changes", opts: metainternalversion.ListOptions{ResourceVersion: "20"},
			before: func(f *viewFixture) { f.write(cm("team-a", "a1", 21, "2", "east")) },
			during: func(f *viewFixture) { f.write(c30) },
			events: []string{"MODIFIED team-a/a1=2@21", "ADDED team-c/c30=1@30"}},
		{name: "resourceVersion N ahead of the cache waits for it", opts: metainternalversion.ListOptions{ResourceVersion: "30"},
			before: func(f *viewFixture) { f.writeLater(50*time.Millisecond, c30) },
			during: func(f *viewFixture) { f.write(cm("team-a", "a1", 31, "3", "east")) },
			events: []string{"MODIFIED team-a/a1=3@31"}},
		{name: "resourceVersion N older than the history is 410", opts: metainternalversion.ListOptions{ResourceVersion: "20"},
			before: func(f *viewFixture) {
				// The history holds 2 events: 21 and 22 are evicted.
				for i := uint64(21); i <= 24; i++ {
					f.write(cm("team-a", "a1", i, "x", "east"))
				}
			},
			historySize: 2, code: http.StatusGone},
		{name: "a resourceVersion that is not a number is 400", opts: metainternalversion.ListOptions{ResourceVersion: "1a"}, code: http.StatusBadRequest},
		{name: "label selector: an object that stops matching is DELETED, one that starts is ADDED",
			opts: metainternalversion.ListOptions{ResourceVersion: "0", LabelSelector: labels.SelectorFromSet(labels.Set{"tier": "web"})},
			during: func(f *viewFixture) {
				f.write(cm("team-b", "b1", 21, "2", "east"))                                               // label removed
				f.write(withLabels(cm("team-a", "a1", 22, "2", "east"), map[string]string{"tier": "web"})) // label added
				f.write(withLabels(cm("team-a", "w1", 23, "2", "west"), map[string]string{"tier": "web"})) // not east's
			},
			initial: []string{"ADDED team-b/b1=1@12"}, events: []string{"DELETED team-b/b1=1@21", "ADDED team-a/a1=2@22"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := sourceAt20()
			withLabels(objs[2], map[string]string{"tier": "web"})
			f := newViewFixture(t, fixtureOptions{historySize: c.historySize}, 20, objs...)
			if c.before != nil {
				c.before(f)
			}
			var watcher rest.Watcher = f.storage
			ctx, cancel := context.WithCancel(viewCtx("east", ""))
			defer cancel()
			w, err := watcher.Watch(ctx, &c.opts)
			if c.code != 0 {
				expectCode(t, "Watch", err, c.code)
				return
			}
			if err != nil {
				t.Fatalf("Watch: %v", err)
			}
			defer w.Stop()
			if got := events(t, w, len(c.initial)); strings.Join(sorted(got), ", ") != strings.Join(sorted(c.initial), ", ") {
				t.Fatalf("initial events:\n got %v\nwant %v", got, c.initial)
			}
			if c.during != nil {
				c.during(f)
			}
			if got := events(t, w, len(c.events)); strings.Join(got, ", ") != strings.Join(c.events, ", ") {
				t.Fatalf("events:\n got %v\nwant %v", got, c.events)
			}
			noMoreEvents(t, w)
		})
	}
}

// TestWatchEndsWithItsContext: a watch ends (its channel closes) when the request ends.
func TestWatchEndsWithItsContext(t *testing.T) {
	f := newViewFixture(t, fixtureOptions{}, 20, sourceAt20()...)
	ctx, cancel := context.WithCancel(viewCtx("east", ""))
	w, err := f.storage.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: "20"})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case e, ok := <-w.ResultChan():
		if ok {
			t.Fatalf("an event after the request ended: %v", e.Type)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not end with its request")
	}
}

// TestWatchAheadWaitsTheFreshnessTimeout: a watch resumed from a resourceVersion the cache never
// reaches waits the view's freshness timeout (300ms in the fixture), the one timeout of every
// wait for freshness, not a second one of the cache's (it waited 3s), then answers 504 "Too
// large resource version" with a retry hint, as kube-apiserver's watch cache does.
func TestWatchAheadWaitsTheFreshnessTimeout(t *testing.T) {
	f := newViewFixture(t, fixtureOptions{}, 20, sourceAt20()...)
	start := time.Now()
	_, err := f.storage.Watch(viewCtx("east", ""), &metainternalversion.ListOptions{ResourceVersion: "30"})
	elapsed := time.Since(start)
	expectCode(t, "Watch", err, http.StatusGatewayTimeout)
	if !storage.IsTooLargeResourceVersion(err) {
		t.Fatalf("got %v, want Too large resource version", err)
	}
	if elapsed < 300*time.Millisecond || elapsed > 2*time.Second {
		t.Fatalf("answered after %v, want the freshness timeout (300ms)", elapsed)
	}
}
