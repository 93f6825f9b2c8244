package e2e

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
)

// TestStatusWritesOfOtherLocationsAreNoEvents: several locations write the
// status of the same objects through their views. Each location's watch gets an event for each
// of its own writes and none for the other locations' (which change nothing it can see), a
// resume from the list's resourceVersion replays exactly the same events, and every write made
// with the resourceVersion the location listed succeeds although the source object moved on
// meanwhile (no conflicts). Every object listed, answered to a write or in an event is
// recorded by location, object and resourceVersion: none is shown with two contents
// (docs/views.md, "Restarts and replicas"). Fails on main before the fix: the writes at the
// listed resourceVersions were 409s, and every location saw every location's writes.
func TestStatusWritesOfOtherLocationsAreNoEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := startStatusEnv(t, ctx)
	locations := []string{"east", "west", "north", "south"}
	env.connectViews(t, "north", "south")
	const objects = 5
	names := []string{"sentinel"}
	for i := 0; i < objects; i++ {
		names = append(names, fmt.Sprintf("ev-%d", i))
		env.create(t, ctx, thingsGVR, reflectStatus(newWidget(thingsGVR, "Thing", "apps", names[i+1], locations...)))
	}
	env.create(t, ctx, thingsGVR, newWidget(thingsGVR, "Thing", "apps", "sentinel", locations...))

	type seen struct {
		listRV  string
		objects map[string]*unstructured.Unstructured
		watch   watch.Interface
	}
	views := map[string]*seen{}
	shown := newShownContents()
	for _, loc := range locations {
		client := env.views[loc].Resource(thingsGVR).Namespace("apps")
		var list *unstructured.UnstructuredList
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			var err error
			list, err = client.List(ctx, metav1.ListOptions{})
			return err == nil && len(list.Items) == len(names), nil
		})
		if err != nil {
			t.Fatalf("%s's view did not show the %d objects: %v", loc, len(names), err)
		}
		shown.noteList(loc, list)
		s := &seen{listRV: list.GetResourceVersion(), objects: map[string]*unstructured.Unstructured{}}
		for i := range list.Items {
			s.objects[list.Items[i].GetName()] = &list.Items[i]
		}
		if s.watch, err = client.Watch(ctx, metav1.ListOptions{ResourceVersion: s.listRV, AllowWatchBookmarks: true}); err != nil {
			t.Fatal(err)
		}
		defer s.watch.Stop()
		views[loc] = s
	}

	// Every location writes the status of every object, with the resourceVersion it listed,
	// all locations at once. No retry: a 409 fails the test.
	written := map[string]map[string]string{} // location → name → resourceVersion of the answer
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, loc := range locations {
		written[loc] = map[string]string{}
		wg.Add(1)
		go func(loc string) {
			defer wg.Done()
			client := env.views[loc].Resource(thingsGVR).Namespace("apps")
			for _, name := range names[1:] {
				obj := views[loc].objects[name].DeepCopy()
				obj.Object["status"] = map[string]interface{}{"writer": loc}
				answer, err := client.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
				if err != nil {
					t.Errorf("%s's status write of %s at the listed resourceVersion %s: %v", loc, name, obj.GetResourceVersion(), err)
					continue
				}
				shown.note(loc, answer)
				mu.Lock()
				written[loc][name] = answer.GetResourceVersion()
				mu.Unlock()
			}
		}(loc)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// A change every location sees ends each location's stream of events.
	env.update(t, ctx, thingsGVR, "apps", "sentinel", func(u *unstructured.Unstructured) {
		labels := u.GetLabels()
		labels["e2e.kcp.io/sentinel"] = "moved"
		u.SetLabels(labels)
	})
	wantEvents := func(loc string) []string {
		var want []string
		for _, name := range names[1:] {
			want = append(want, fmt.Sprintf("MODIFIED %s@%s writer=%s", name, written[loc][name], loc))
		}
		return append(want, "MODIFIED sentinel")
	}
	for _, loc := range locations {
		got := eventsUntilSentinel(t, ctx, views[loc].watch, func(u *unstructured.Unstructured) { shown.note(loc, u) })
		if want := wantEvents(loc); !reflect.DeepEqual(got, want) {
			t.Errorf("%s's watch got\n  %v\nwant its own writes only\n  %v", loc, got, want)
		}
	}

	// A resume from the listed resourceVersion replays the same events.
	for _, loc := range []string{"east", "south"} {
		w, err := env.views[loc].Resource(thingsGVR).Namespace("apps").Watch(ctx, metav1.ListOptions{ResourceVersion: views[loc].listRV})
		if err != nil {
			t.Fatal(err)
		}
		got := eventsUntilSentinel(t, ctx, w, func(u *unstructured.Unstructured) { shown.note(loc, u) })
		w.Stop()
		if want := wantEvents(loc); !reflect.DeepEqual(got, want) {
			t.Errorf("%s's resumed watch got\n  %v\nwant\n  %v", loc, got, want)
		}
	}
	for _, loc := range locations {
		list, err := env.views[loc].Resource(thingsGVR).Namespace("apps").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		shown.noteList(loc, list)
	}
	shown.check(t)
}

// eventsUntilSentinel reads w until the MODIFIED event of the object "sentinel" and renders the
// events other than bookmarks as "TYPE name@resourceVersion writer=<status.writer>" (the
// sentinel as "MODIFIED sentinel", events of objects written in the order they came; the order
// among different objects is the order of their writes, so the test sorts nothing). note is
// called with the object of every ADDED and MODIFIED event.
func eventsUntilSentinel(t *testing.T, ctx context.Context, w watch.Interface, note func(*unstructured.Unstructured)) []string {
	t.Helper()
	var got []string
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch ended after %v", got)
			}
			if e.Type == watch.Bookmark {
				continue
			}
			u, ok := e.Object.(*unstructured.Unstructured)
			if !ok {
				t.Fatalf("unexpected %s event %T after %v", e.Type, e.Object, got)
			}
			if e.Type == watch.Added || e.Type == watch.Modified {
				note(u)
			}
			if u.GetName() == "sentinel" {
				return append(got, string(e.Type)+" sentinel")
			}
			writer, _, _ := unstructured.NestedString(u.Object, "status", "writer")
			got = append(got, fmt.Sprintf("%s %s@%s writer=%s", e.Type, u.GetName(), u.GetResourceVersion(), writer))
		case <-timeout:
			t.Fatalf("no sentinel event within 30s; got %v", got)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
}
