package cache

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

var (
	testGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	testGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
)

// cm builds a ConfigMap-like object. locs == nil means no assignment annotation. Extra
// annotations/labels are given as "a:key=value" / "l:key=value" in extra, data as
// "d:key=value", finalizers as "f:name", metadata.creationTimestamp and deletionTimestamp as
// "c:RFC3339" and "x:RFC3339".
func cm(ns, name string, rv uint64, locs []string, extra ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{}}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetResourceVersion(strconv.FormatUint(rv, 10))
	ann := map[string]string{}
	lbl := map[string]string{}
	if locs != nil {
		b, _ := json.Marshal(locs)
		ann[contract.AssignedLocationsAnnotation] = string(b)
	}
	for _, e := range extra {
		kind, kv, _ := strings.Cut(e, ":")
		k, v, _ := strings.Cut(kv, "=")
		switch kind {
		case "a":
			ann[k] = v
		case "l":
			lbl[k] = v
		case "d":
			u.Object["data"] = map[string]interface{}{k: v}
		case "f":
			u.SetFinalizers(append(u.GetFinalizers(), kv))
		case "c", "x":
			tm, err := time.Parse(time.RFC3339, kv)
			if err != nil {
				panic(err)
			}
			if kind == "c" {
				u.SetCreationTimestamp(metav1.NewTime(tm))
			} else {
				u.SetDeletionTimestamp(&metav1.Time{Time: tm})
			}
		}
	}
	if len(ann) > 0 {
		u.SetAnnotations(ann)
	}
	if len(lbl) > 0 {
		u.SetLabels(lbl)
	}
	return u
}

func locs(l ...string) []string { return l }

func newTestStore(t testing.TB, opts StoreOptions) *ResourceStore {
	t.Helper()
	if opts.DefaultCluster == "" {
		opts.DefaultCluster = "root"
	}
	s := NewResourceStore(testGVR, testGVK, true, opts)
	t.Cleanup(s.Close)
	return s
}

func mustReplace(t testing.TB, s *ResourceStore, rv uint64, objs ...*unstructured.Unstructured) {
	t.Helper()
	items := make([]interface{}, len(objs))
	for i, o := range objs {
		items[i] = o
	}
	if err := s.Replace(items, strconv.FormatUint(rv, 10)); err != nil {
		t.Fatalf("Replace: %v", err)
	}
}

func mustAdd(t testing.TB, s *ResourceStore, u *unstructured.Unstructured) {
	t.Helper()
	if err := s.Add(u); err != nil {
		t.Fatalf("Add: %v", err)
	}
}

func mustUpdate(t testing.TB, s *ResourceStore, u *unstructured.Unstructured) {
	t.Helper()
	if err := s.Update(u); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func mustDelete(t testing.TB, s *ResourceStore, u *unstructured.Unstructured) {
	t.Helper()
	if err := s.Delete(u); err != nil {
		t.Fatalf("Delete: %v", err)
	}
}

func mustWatch(t testing.TB, s *ResourceStore, loc string, opts WatchOptions) watch.Interface {
	t.Helper()
	w, err := s.Watch(context.Background(), loc, opts)
	if err != nil {
		t.Fatalf("Watch(%s): %v", loc, err)
	}
	t.Cleanup(w.Stop)
	return w
}

// ev renders a watch event as "TYPE name@rv" (bookmarks: "BOOKMARK@rv", with "+end" for the
// initial-events-end bookmark).
func ev(e watch.Event) string {
	switch o := e.Object.(type) {
	case *Object:
		if got := o.Unstructured().GetResourceVersion(); got != strconv.FormatUint(o.ResourceVersion(), 10) {
			return fmt.Sprintf("%s %s@%d(metadata rv %s)", e.Type, o.Name(), o.ResourceVersion(), got)
		}
		return fmt.Sprintf("%s %s@%d", e.Type, o.Name(), o.ResourceVersion())
	case *bookmark:
		return ev(watch.Event{Type: e.Type, Object: o.u})
	case *unstructured.Unstructured:
		s := fmt.Sprintf("%s@%s", e.Type, o.GetResourceVersion())
		if o.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
			s += "+end"
		}
		return s
	default:
		return fmt.Sprintf("%s %T", e.Type, e.Object)
	}
}

// next reads the next event or fails after a timeout.
func next(t testing.TB, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case e, ok := <-w.ResultChan():
		if !ok {
			t.Fatalf("watch closed")
		}
		return e
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for an event")
	}
	return watch.Event{}
}

// expect reads len(want) events and compares their rendering; then checks nothing else is
// pending.
func expect(t testing.TB, w watch.Interface, want ...string) {
	t.Helper()
	var got []string
	for range want {
		got = append(got, ev(next(t, w)))
	}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("events:\n got: %v\nwant: %v", got, want)
	}
	expectNothing(t, w)
}

// expectNothing checks that the store delivered nothing to w that the test has not read. The
// store dispatches an event to its watchers under its lock, before the write that caused it
// returns (dispatch.go): the event is then in the result channel, or queued for the watcher's
// pump goroutine (delivery.go). So once the pump is idle, everything delivered so far is in
// the result channel, and an empty channel means nothing was. It waits for the pump, not for
// a fixed time.
func expectNothing(t testing.TB, w watch.Interface) {
	t.Helper()
	ww, ok := w.(*watcher)
	if !ok {
		t.Fatalf("expectNothing of a %T, not a store's watcher", w)
	}
	idle := func(context.Context) (bool, error) {
		ww.mu.Lock()
		defer ww.mu.Unlock()
		return !ww.pumping || len(ww.result) > 0, nil
	}
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true, idle); err != nil {
		t.Fatalf("the watcher's pump is still sending after 5s")
	}
	select {
	case e, ok := <-w.ResultChan():
		if ok {
			t.Fatalf("unexpected event %s", ev(e))
		}
		t.Fatalf("unexpected close")
	default:
	}
}

// expectClosed waits for the result channel to close, discarding events.
func expectClosed(t testing.TB, w watch.Interface) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-w.ResultChan():
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("watch not closed")
		}
	}
}

// sourceObject returns o.SourceObject(), failing the test on its error.
func sourceObject(t testing.TB, o *Object) *unstructured.Unstructured {
	t.Helper()
	u, err := o.SourceObject()
	if err != nil {
		t.Fatal(err)
	}
	return u
}
