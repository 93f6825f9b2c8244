package view

import (
	"context"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
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
// not synced): its visible resourceVersion (ResourceVersion), the source's resourceVersion of
// the cached version (SourceResourceVersion) and its generation (ViewGeneration). ok is false
// when the cache cannot say (the object is not in this location's view, or the cache is still
// behind sourceRV).
func (s *statusStorage) visibleView(ctx context.Context, location, cluster, namespace, name string, sourceRV uint64) (obj *cache.Object, ok bool) {
	if s.store.HasSynced() {
		_ = s.freshness.waitFor(ctx, sourceRV)
	}
	obj, _, found := s.store.GetInCluster(location, cluster, namespace, name)
	if !found || obj.SourceResourceVersion() < sourceRV {
		return nil, false
	}
	return obj, true
}

// preconditionHolds reports whether a write through a view (status, or a location's finalizer)
// carrying resourceVersion want may be applied to current, the source object as just read:
// want is current's resourceVersion, or this location's view has not changed since want (its
// visible resourceVersion is at most want, and want is at most current's or is the visible
// resourceVersion itself). The visible resourceVersion exceeds current's after a re-rendering
// (a Customization that changed, or a rendering the Renderer made after ingest, shows the
// object at the resourceVersion of that re-rendering event, which is the store's, not the
// object's: docs/views.md, "Customizations and resourceVersions", "Deferred renderings"), and
// after a restart (the first list shows an object whose generation has moved at the list's
// resourceVersion: docs/views.md, "Restarts and replicas").
// The cache's view may be of a newer source version than current (the object changed after
// the read): its visible resourceVersion is then an upper bound of current's, and the source
// write, made with current's resourceVersion, conflicts and is retried on a fresh read.
func (s *statusStorage) preconditionHolds(ctx context.Context, location, cluster string, current *unstructured.Unstructured, want string) bool {
	if want == current.GetResourceVersion() {
		return true
	}
	v, err1 := strconv.ParseUint(want, 10, 64)
	r, err2 := strconv.ParseUint(current.GetResourceVersion(), 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	obj, ok := s.visibleView(ctx, location, cluster, current.GetNamespace(), current.GetName(), r)
	if !ok {
		return false
	}
	visible := obj.ResourceVersion()
	return visible <= v && (v <= r || v == visible)
}

// answerResourceVersion sets on answer, the location's view of the written object, the
// resourceVersion and generation the view shows for it, when the cache knows them:
//   - A write that changed the source object shows the write's resourceVersion (the write
//     changed this location's own status, so its view changed there), and the generation the
//     view showed before: a write of a location's status changes its view in .status only,
//     which moves no view's generation (docs/views.md), although kube-apiserver may have bumped
//     the source's (a Deployment's annotations). Known when the cache holds the version written
//     over or the written one; the write's answer does not wait for the cache.
//   - A write the source found to be a no-op (the resourceVersion did not move) shows the
//     location's visible resourceVersion and generation, as kube-apiserver answers a no-op
//     update with the unchanged object.
func (s *statusStorage) answerResourceVersion(ctx context.Context, answer, current, written *unstructured.Unstructured, location, cluster string) {
	r, err1 := strconv.ParseUint(current.GetResourceVersion(), 10, 64)
	w, err2 := strconv.ParseUint(written.GetResourceVersion(), 10, 64)
	if err1 != nil || err2 != nil {
		return
	}
	var obj *cache.Object
	if w == r {
		obj, _ = s.visibleView(ctx, location, cluster, written.GetNamespace(), written.GetName(), r)
	} else {
		obj, _, _ = s.store.GetInCluster(location, cluster, written.GetNamespace(), written.GetName())
	}
	if obj == nil || (obj.SourceResourceVersion() != r && obj.SourceResourceVersion() != w) {
		return
	}
	if g := obj.ViewGeneration(location); g != 0 {
		answer.SetGeneration(g)
	}
	if w == r {
		answer.SetResourceVersion(strconv.FormatUint(obj.ResourceVersion(), 10))
	}
}
