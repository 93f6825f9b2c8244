package view

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// This file holds the fixture of the storage tests: one resource (ConfigMaps) of a location
// view served by a real cache.ResourceStore, which the test feeds the way client-go's reflector
// feeds it in the server (Replace for a list, Add/Update/Delete for watch events), and a source
// whose current resourceVersion and objects the test sets.

var (
	configMapsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	configMapsInfo = source.ResourceInfo{GVR: configMapsGVR, Kind: "ConfigMap", ListKind: "ConfigMapList", SingularName: "configmap", Namespaced: true, HasStatus: false}
)

// testSource is the view's Source: the source API server's current resourceVersion and its
// objects as the test sets them, or an error as when the source is unreachable.
type testSource struct {
	Source  // ClusterResource and Resource: not used by reads
	mu      sync.Mutex
	rv      uint64
	objects map[string]*unstructured.Unstructured // namespace/name
	err     error
}

func (s *testSource) ResourceVersion(context.Context, schema.GroupVersionResource) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rv, s.err
}

func (s *testSource) Get(_ context.Context, gvr schema.GroupVersionResource, _, namespace, name string) (*unstructured.Unstructured, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	o, ok := s.objects[namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	return o.DeepCopy(), nil
}

// set records obj as the source's current version of it and the source's resourceVersion.
func (s *testSource) set(obj *unstructured.Unstructured) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[obj.GetNamespace()+"/"+obj.GetName()] = obj.DeepCopy()
	if rv, _ := strconv.ParseUint(obj.GetResourceVersion(), 10, 64); rv > s.rv {
		s.rv = rv
	}
}

// viewFixture is the ConfigMaps of a location view over a real store.
type viewFixture struct {
	t       *testing.T
	store   *cache.ResourceStore
	source  *testSource
	storage *resourceStorage
	clock   *testingclock.FakeClock
}

// fixtureOptions tune a fixture; zero values are fine.
type fixtureOptions struct {
	historySize int
}

// newViewFixture returns a fixture whose store is synced at listRV with objs (the source's
// first list). Reads wait at most 300ms for freshness, so that a test of a timeout is quick.
func newViewFixture(t *testing.T, opts fixtureOptions, listRV uint64, objs ...*unstructured.Unstructured) *viewFixture {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Now())
	store := cache.NewResourceStore(configMapsGVR, configMapsInfo.GVK(), true, cache.StoreOptions{
		DefaultCluster:   "root",
		HistorySize:      opts.historySize,
		BookmarkInterval: time.Hour,
		Clock:            clk,
	})
	t.Cleanup(store.Close)
	src := &testSource{rv: listRV, objects: map[string]*unstructured.Unstructured{}}
	f := &viewFixture{t: t, store: store, source: src, clock: clk, storage: &resourceStorage{
		info: configMapsInfo, store: store, source: src,
		freshness: freshness{gvr: configMapsGVR, store: store, source: src, timeout: 300 * time.Millisecond, consistentReadWait: 300 * time.Millisecond},
		clusters:  clusters{plain: "root"},
	}}
	items := make([]interface{}, len(objs))
	for i, o := range objs {
		items[i] = o
		src.set(o)
	}
	if err := store.Replace(items, strconv.FormatUint(listRV, 10)); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	return f
}

// write feeds one source write (a watch event of the reflector: Add and Update are the same
// upsert) to the store and records it as the source's current state.
func (f *viewFixture) write(obj *unstructured.Unstructured) {
	f.t.Helper()
	f.source.set(obj)
	if err := f.store.Update(obj); err != nil {
		f.t.Fatalf("Update: %v", err)
	}
}

// remove feeds the deletion of obj (at obj's resourceVersion) to the store.
func (f *viewFixture) remove(obj *unstructured.Unstructured) {
	f.t.Helper()
	f.source.mu.Lock()
	delete(f.source.objects, obj.GetNamespace()+"/"+obj.GetName())
	if rv, _ := strconv.ParseUint(obj.GetResourceVersion(), 10, 64); rv > f.source.rv {
		f.source.rv = rv
	}
	f.source.mu.Unlock()
	if err := f.store.Delete(obj); err != nil {
		f.t.Fatalf("Delete: %v", err)
	}
}

// writeLater feeds obj to the store after d, from another goroutine, as a source event that
// arrives while a read waits.
func (f *viewFixture) writeLater(d time.Duration, obj *unstructured.Unstructured) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(d)
		f.source.set(obj)
		if err := f.store.Update(obj); err != nil {
			f.t.Errorf("Update: %v", err)
		}
	}()
	f.t.Cleanup(func() { <-done })
}

// viewCtx returns the context of a request inside location's view in namespace ns ("" for all).
func viewCtx(location, ns string) context.Context {
	ctx := withLocation(context.Background(), location)
	if ns != "" {
		ctx = genericapirequest.WithNamespace(ctx, ns)
	}
	return ctx
}

// cm builds a source ConfigMap at rv assigned to locs (none: no annotation), with data
// {"v": data}.
func cm(ns, name string, rv uint64, data string, locs ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"namespace": ns, "name": name, "resourceVersion": strconv.FormatUint(rv, 10), "uid": "uid-" + ns + "-" + name},
		"data":     map[string]interface{}{"v": data},
	}}
	if locs != nil {
		b, _ := json.Marshal(locs)
		u.SetAnnotations(map[string]string{contract.AssignedLocationsAnnotation: string(b)})
	}
	return u
}

// withLabels returns u with labels set.
func withLabels(u *unstructured.Unstructured, labels map[string]string) *unstructured.Unstructured {
	u.SetLabels(labels)
	return u
}

// asUnstructured returns the content of an object a storage returned.
func asUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	switch o := obj.(type) {
	case *cache.Object:
		return o.Unstructured()
	case *unstructured.Unstructured:
		return o
	}
	t.Fatalf("unexpected object %T", obj)
	return nil
}

// describe renders an object as "namespace/name=data@rv".
func describe(t *testing.T, obj runtime.Object) string {
	u := asUnstructured(t, obj)
	data, _, _ := unstructured.NestedString(u.Object, "data", "v")
	return u.GetNamespace() + "/" + u.GetName() + "=" + data + "@" + u.GetResourceVersion()
}

// listed returns a list's items as describe renders them, and its resourceVersion.
func listed(t *testing.T, obj runtime.Object) ([]string, string) {
	t.Helper()
	l, ok := obj.(*List)
	if !ok {
		t.Fatalf("List returned %T", obj)
	}
	out := make([]string, 0, len(l.Items))
	for _, it := range l.Items {
		out = append(out, describe(t, it))
	}
	return out, l.ResourceVersion
}

// statusCode returns the HTTP code of an API error (0 for nil, -1 for a non-API error).
func statusCode(err error) int {
	if err == nil {
		return 0
	}
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		return int(s.Status().Code)
	}
	return -1
}

// expectCode fails unless err is an API error with code.
func expectCode(t *testing.T, what string, err error, code int) {
	t.Helper()
	if got := statusCode(err); got != code {
		t.Fatalf("%s: got %v (code %d), want code %d (%s)", what, err, got, code, http.StatusText(code))
	}
}

// events reads n events from w, rendered as "TYPE namespace/name=data@rv" (bookmarks:
// "BOOKMARK@rv", "+end" for the bookmark that ends the initial events).
func events(t *testing.T, w watch.Interface, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %v", out)
			}
			out = append(out, renderEvent(t, e))
		case <-time.After(5 * time.Second):
			t.Fatalf("timed out after events %v, want %d", out, n)
		}
	}
	return out
}

func renderEvent(t *testing.T, e watch.Event) string {
	if e.Type == watch.Bookmark || e.Type == watch.Error {
		u, err := meta.Accessor(e.Object) // the cache's BOOKMARK objects are its own type
		if err != nil {
			return string(e.Type) + " " + string(mustJSON(e.Object))
		}
		s := string(e.Type) + "@" + u.GetResourceVersion()
		if u.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
			s += "+end"
		}
		return s
	}
	return string(e.Type) + " " + describe(t, e.Object)
}

func mustJSON(v interface{}) []byte {
	b, _ := json.Marshal(v)
	return b
}

// noMoreEvents fails if w delivers an event within a short wait.
func noMoreEvents(t *testing.T, w watch.Interface) {
	t.Helper()
	select {
	case e, ok := <-w.ResultChan():
		if ok {
			t.Fatalf("unexpected event %s", renderEvent(t, e))
		}
		t.Fatalf("the watch closed")
	case <-time.After(50 * time.Millisecond):
	}
}

// sorted returns a sorted copy of s (initial events have no defined order).
func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// yes returns a pointer to true (sendInitialEvents=true).
func yes() *bool { b := true; return &b }
