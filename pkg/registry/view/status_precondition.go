package view

import (
	"context"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A location's view shows an object at the location's visible resourceVersion: the source
// resourceVersion of the last change the location can see (cache.Object.VisibleResourceVersion),
// so that status records of other locations are no events in its view (docs/views.md, "Status
// writes of other locations"). A client of the view therefore holds a resourceVersion that is
// often older than the source object's. The status write path accepts it as kube-apiserver
// accepts a current one: a resourceVersion precondition V holds when nothing this location can
// see changed after V, i.e. visible <= V <= source. The source write then carries the source's
// resourceVersion as its precondition, so nothing the client did not see is ever overwritten.

// visibleView returns the location's view of the object cluster/namespace/name from the cache
// once the cache has caught up with sourceRV, the resourceVersion of the source object just
// read (waiting at most the freshness timeout, freshness.waitFor; no wait when the cache has
// not synced). ok is false when the cache cannot say (the object is not in this location's view, or
// the cache is still behind sourceRV).
func (s *statusStorage) visibleView(ctx context.Context, location, cluster, namespace, name string, sourceRV uint64) (visible, cachedSourceRV uint64, ok bool) {
	if s.store.HasSynced() {
		_ = s.freshness.waitFor(ctx, sourceRV)
	}
	obj, _, found := s.store.GetInCluster(location, cluster, namespace, name)
	if !found || obj.SourceResourceVersion() < sourceRV {
		return 0, 0, false
	}
	return obj.ResourceVersion(), obj.SourceResourceVersion(), true
}

// preconditionHolds reports whether a status write carrying resourceVersion want may be applied
// to current, the source object as just read: want is current's resourceVersion, or this
// location's view has not changed since want (its visible resourceVersion is at most want).
// The cache's view may be of a newer source version than current (the object changed after
// the read): its visible resourceVersion is then an upper bound of current's, and the source
// write, made with current's resourceVersion, conflicts and is retried on a fresh read.
func (s *statusStorage) preconditionHolds(ctx context.Context, location, cluster string, current *unstructured.Unstructured, want string) bool {
	if want == current.GetResourceVersion() {
		return true
	}
	v, err1 := strconv.ParseUint(want, 10, 64)
	r, err2 := strconv.ParseUint(current.GetResourceVersion(), 10, 64)
	if err1 != nil || err2 != nil || v > r {
		return false
	}
	visible, _, ok := s.visibleView(ctx, location, cluster, current.GetNamespace(), current.GetName(), r)
	return ok && visible <= v
}

// answerResourceVersion sets on answer, the location's view of the written object, the
// resourceVersion the view shows for it. A write that changed the source object shows the
// write's resourceVersion (the write changed this location's own status, so its view changed
// there). A write the source found to be a no-op (the resourceVersion did not move) shows the
// location's visible resourceVersion, as kube-apiserver answers a no-op update with the
// unchanged object, when the cache knows it.
func (s *statusStorage) answerResourceVersion(ctx context.Context, answer, current, written *unstructured.Unstructured, location, cluster string) {
	if written.GetResourceVersion() != current.GetResourceVersion() {
		return
	}
	r, err := strconv.ParseUint(written.GetResourceVersion(), 10, 64)
	if err != nil {
		return
	}
	if visible, cachedRV, ok := s.visibleView(ctx, location, cluster, written.GetNamespace(), written.GetName(), r); ok && cachedRV == r {
		answer.SetResourceVersion(strconv.FormatUint(visible, 10))
	}
}
