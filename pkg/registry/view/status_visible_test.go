package view

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// TestStatusWriteAtVisibleResourceVersion: east's view shows a shared object
// at the resourceVersion of the last change east can see. A status write carrying that
// resourceVersion succeeds when only other locations' status records changed since (also when
// such a write races with it), and is a 409 when something east can see changed. Fails on main
// before the fix: the write at east's resourceVersion was a 409 as soon as west had written.
// West's records bump the object's generation, as kube-apiserver does for a Deployment's
// annotations: the answer to east's write shows the generation east's view shows (1), not the
// source's (fails without answerResourceVersion's generation: 2 or 3).
func TestStatusWriteAtVisibleResourceVersion(t *testing.T) {
	ready := map[string]interface{}{"phase": "Ready"}
	westWrites := func(s *statusSource, store *cache.ResourceStore, phase string) func() {
		return func() {
			u := tracked(t, s)
			ann := u.GetAnnotations()
			ann[contract.StatusRecordAnnotationPrefix+"west"] = `{"phase":"` + phase + `"}`
			u.SetAnnotations(ann)
			u.SetGeneration(u.GetGeneration() + 1)
			bumpAndStore(t, s, store, u)
		}
	}
	cases := []struct {
		name string
		// before runs after the store holds RV 7 and east read it, before east writes.
		before func(s *statusSource, store *cache.ResourceStore)
		// race runs right before east's write reaches the source.
		race func(s *statusSource, store *cache.ResourceStore)
		code int
	}{
		{name: "west wrote its record since: accepted",
			before: func(s *statusSource, store *cache.ResourceStore) {
				westWrites(s, store, "w1")()
				westWrites(s, store, "w2")()
			}},
		{name: "west's write races with east's: retried and accepted",
			race: func(s *statusSource, store *cache.ResourceStore) { westWrites(s, store, "w1")() }},
		{name: "the spec changed since: 409",
			before: func(s *statusSource, store *cache.ResourceStore) {
				u := tracked(t, s)
				_ = unstructured.SetNestedField(u.Object, int64(4), "spec", "size")
				bumpAndStore(t, s, store, u)
			}, code: http.StatusConflict},
		{name: "a change east can see races with east's write: 409",
			race: func(s *statusSource, store *cache.ResourceStore) {
				u := tracked(t, s)
				_ = unstructured.SetNestedField(u.Object, int64(4), "spec", "size")
				bumpAndStore(t, s, store, u)
			}, code: http.StatusConflict},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, store, st, write := sharedWidgetSeenByEast(t, 1, "7")
			write.Object["status"] = ready
			if c.before != nil {
				c.before(src, store)
			}
			if c.race != nil {
				src.race = func() { c.race(src, store) }
			}
			if now, _ := st.Get(viewCtx("east", "team-a"), "w", &metav1.GetOptions{}); c.code == 0 && asUnstructured(t, now).GetResourceVersion() != "7" {
				t.Fatalf("east's view moved to %s although only west's record changed", asUnstructured(t, now).GetResourceVersion())
			}
			answer, _, err := st.Update(viewCtx("east", "team-a"), "w", rest.DefaultUpdatedObjectInfo(write), nil, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			if c.code != 0 {
				expectCode(t, "status write", err, c.code)
				if _, has := src.get(t, "w").GetAnnotations()[contract.StatusRecordAnnotationPrefix+"east"]; has {
					t.Error("a refused write reached the source")
				}
				return
			}
			if err != nil {
				t.Fatalf("status write at east's visible resourceVersion 7: %v", err)
			}
			after := src.get(t, "w")
			ann := after.GetAnnotations()
			if !equalJSON(json.RawMessage(ann[contract.StatusRecordAnnotationPrefix+"east"]), ready) || ann[contract.StatusRecordAnnotationPrefix+"west"] == "" {
				t.Errorf("source records after the write: east %q, west %q; want east's new one and west's kept", ann[contract.StatusRecordAnnotationPrefix+"east"], ann[contract.StatusRecordAnnotationPrefix+"west"])
			}
			if got := asUnstructured(t, answer).GetResourceVersion(); got != after.GetResourceVersion() {
				t.Errorf("the answer shows resourceVersion %s, want the write's %s", got, after.GetResourceVersion())
			}
			if got := asUnstructured(t, answer).GetGeneration(); got != 1 {
				t.Errorf("the answer shows generation %d (the source is at %d), want east's view's 1", got, after.GetGeneration())
			}
		})
	}
}

// sharedWidgetSeenByEast returns a source holding the widget w at resourceVersion 7 with
// metadata.generation generation, assigned to east and west and reflecting status, a store whose
// first list of it is at listRV, the status storage over both, and the object east's view
// shows (a copy the caller owns).
func sharedWidgetSeenByEast(t *testing.T, generation int64, listRV string) (*statusSource, *cache.ResourceStore, *statusStorage, *unstructured.Unstructured) {
	t.Helper()
	w := widget("w", 7, []string{"east", "west"}, map[string]string{contract.StatusPolicyAnnotation: contract.StatusPolicyReflect}, nil)
	w.SetGeneration(generation)
	src := newStatusSource(t, w)
	store := cache.NewResourceStore(widgetsGVR, widgetsInfo.GVK(), true, cache.StoreOptions{DefaultCluster: "root"})
	t.Cleanup(store.Close)
	if err := store.Replace([]interface{}{src.get(t, "w")}, listRV); err != nil {
		t.Fatal(err)
	}
	st := &statusStorage{info: widgetsInfo, store: store, source: src, clusters: clusters{plain: "root"}, freshness: freshness{gvr: widgetsGVR, store: store, source: src}}
	seen, err := st.Get(viewCtx("east", "team-a"), "w", &metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return src, store, st, asUnstructured(t, seen).DeepCopy()
}

// bumpAndStore writes u to the source with the next resourceVersion, as another writer, and
// feeds that version to the store as the reflector would.
func bumpAndStore(t *testing.T, s *statusSource, store *cache.ResourceStore, u *unstructured.Unstructured) {
	t.Helper()
	n, _ := strconv.Atoi(u.GetResourceVersion())
	u.SetResourceVersion(strconv.Itoa(n + 1))
	if err := s.client.Tracker().Update(widgetsGVR, u, "team-a"); err != nil {
		t.Fatal(err)
	}
	if err := store.Update(u.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if got := store.ResourceVersion(); got != uint64(n+1) {
		t.Fatalf("store at %d, want %d", got, n+1)
	}
}

// tracked returns the source's object w from the tracker (safe inside a reactor, unlike the
// client).
func tracked(t *testing.T, s *statusSource) *unstructured.Unstructured {
	t.Helper()
	o, err := s.client.Tracker().Get(widgetsGVR, "team-a", "w")
	if err != nil {
		t.Fatal(err)
	}
	return o.(*unstructured.Unstructured).DeepCopy()
}

// TestStatusWriteAtFirstListResourceVersion: after a restart the first list shows an object
// whose generation has moved at the list's resourceVersion, above the source object's own
// (docs/views.md, "Restarts and replicas"). A status write carrying what the view shows is a
// write at the current version: accepted, and the answer shows the write's resourceVersion.
// A resourceVersion above the source's that the view does not show stays a 409. Fails without
// preconditionHolds' rule for the view's own resourceVersion: every write at 9 was a 409, and
// so every retry of a client that reread the view.
func TestStatusWriteAtFirstListResourceVersion(t *testing.T) {
	for _, c := range []struct {
		rv   string
		code int
	}{{rv: "9"}, {rv: "8", code: http.StatusConflict}} {
		t.Run(c.rv, func(t *testing.T) {
			src, _, st, write := sharedWidgetSeenByEast(t, 2, "9")
			if write.GetResourceVersion() != "9" {
				t.Fatalf("east's view shows resourceVersion %s, want the list's 9", write.GetResourceVersion())
			}
			write.SetResourceVersion(c.rv)
			write.Object["status"] = map[string]interface{}{"phase": "Ready"}
			answer, _, err := st.Update(viewCtx("east", "team-a"), "w", rest.DefaultUpdatedObjectInfo(write), nil, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			if c.code != 0 {
				expectCode(t, "status write", err, c.code)
				return
			}
			if err != nil {
				t.Fatalf("status write at the view's resourceVersion 9: %v", err)
			}
			if got, want := asUnstructured(t, answer).GetResourceVersion(), src.get(t, "w").GetResourceVersion(); got != want {
				t.Errorf("the answer shows resourceVersion %s, want the write's %s", got, want)
			}
		})
	}
}
