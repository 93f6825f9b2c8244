package view

import (
	"context"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// maxQuoted is how many bytes of a client- or source-supplied value a Status message repeats
// (contract.Truncate): a hostile value never becomes a huge error response or log line.
const maxQuoted = 256

// resourceStorage serves one mirrored resource of a location view: rest.Getter, rest.Lister,
// rest.Watcher and rest.TableConvertor over a cache.ResourceStore. The location comes from the
// request context (LocationFrom); one resourceStorage serves every location.
type resourceStorage struct {
	info   source.ResourceInfo
	store  Store
	source Source
	// freshness waits for the cache to reach the resourceVersions reads ask for.
	freshness freshness
	table     tableConvertor
	clusters  clusters
}

var (
	_ rest.Getter         = &resourceStorage{}
	_ rest.Lister         = &resourceStorage{}
	_ rest.Watcher        = &resourceStorage{}
	_ rest.TableConvertor = &resourceStorage{}
)

// New returns an empty object of the resource's kind.
func (r *resourceStorage) New() runtime.Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(r.info.GVR.GroupVersion().WithKind(r.info.Kind))
	return u
}

// NewList returns an empty list of the resource's list kind.
func (r *resourceStorage) NewList() runtime.Object {
	return &List{TypeMeta: metav1.TypeMeta{APIVersion: r.info.GVR.GroupVersion().String(), Kind: r.info.ListKind}}
}

// Destroy releases nothing: the cache owns the store.
func (r *resourceStorage) Destroy() {}

// ConvertToTable renders objects for kubectl (see tableConvertor).
func (r *resourceStorage) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	return r.table.ConvertToTable(ctx, obj, opts)
}

// Get returns the named object if it is assigned to the request's location, else 404. On the
// all-clusters path of a kcp source, a namespace/name held by several logical clusters is 400
// (see clusters.find).
//
// resourceVersion "" is a consistent read: the object is read from the source (in its logical
// cluster) and the cache is waited for until it holds that version, so any source write that
// completed before the request is seen (and the answer still comes from the cache, consistent
// with the view's watches), rendered by its Customizations (a rendering still pending is waited
// for, as the cache's own progress is: freshness.waitRendered). On a kcp source's all-clusters
// path the cluster is the cache's only
// one for namespace/name; when the cache holds none, the read waits as a consistent list does
// (waitConsistent). "0" reads the cache as it is; N waits until the cache reached N.
func (r *resourceStorage) Get(ctx context.Context, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	location, _ := LocationFrom(ctx)
	namespace := genericapirequest.NamespaceValue(ctx)
	mode, rv, err := parseResourceVersion(opts.ResourceVersion, "")
	if err != nil {
		return nil, err
	}
	switch mode {
	case readConsistent:
		cluster := r.clusters.requestCluster(ctx)
		if cluster == "" {
			obj, err := r.clusters.find(ctx, r.store, r.info.GVR.GroupResource(), location, namespace, name)
			switch {
			case apierrors.IsNotFound(err):
				if err := r.freshness.waitConsistent(ctx); err != nil {
					return nil, err
				}
				return r.clusters.find(ctx, r.store, r.info.GVR.GroupResource(), location, namespace, name)
			case err != nil:
				return nil, err
			}
			cluster = obj.Cluster()
		}
		if r.clusters.plain != "" && cluster != r.clusters.plain {
			return nil, r.notFound(name) // a plain source has no other cluster
		}
		src, err := r.source.Get(ctx, r.info.GVR, cluster, namespace, name)
		if apierrors.IsNotFound(err) {
			return nil, r.notFound(name)
		}
		if err != nil {
			return nil, sourceError(err)
		}
		srcRV, err := strconv.ParseUint(src.GetResourceVersion(), 10, 64)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("source returned resourceVersion %q: %w", src.GetResourceVersion(), err))
		}
		if err := r.freshness.waitFor(ctx, srcRV); err != nil {
			return nil, err
		}
		if err := r.freshness.waitRendered(ctx, location, cluster, namespace, name); err != nil {
			return nil, err
		}
	case readNotOlderThan:
		if err := r.freshness.waitFor(ctx, rv); err != nil {
			return nil, err
		}
	}
	return r.clusters.find(ctx, r.store, r.info.GVR.GroupResource(), location, namespace, name)
}

// List returns the location's objects of this resource that match the request's namespace and
// selectors, in key order, paged by limit/continue; every page of one list is served from the
// snapshot of the first page (its resourceVersion is in the continue token). An expired
// snapshot answers 410, after which client-go's pager relists.
//
// resourceVersion "" waits until the cache is proven to have caught up with the source (see
// waitConsistent); "0" serves the cache as it is; N (NotOlderThan) waits until the cache reached N;
// N with resourceVersionMatch=Exact serves the snapshot at N if it is still kept, else 410.
func (r *resourceStorage) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	location, _ := LocationFrom(ctx)
	namespace := genericapirequest.NamespaceValue(ctx)
	lo := cache.ListOptions{Limit: opts.Limit, Predicate: listPredicate(namespace, opts), Part: PartFrom(ctx)}
	if opts.Continue != "" {
		after, snapshotRV, err := decodeContinue(opts.Continue)
		if err != nil {
			return nil, err
		}
		lo.After, lo.SnapshotRV = after, snapshotRV
	} else {
		mode, rv, err := parseResourceVersion(opts.ResourceVersion, opts.ResourceVersionMatch)
		if err != nil {
			return nil, err
		}
		switch mode {
		case readConsistent:
			if err := r.freshness.waitConsistent(ctx); err != nil {
				return nil, err
			}
		case readNotOlderThan:
			if err := r.freshness.waitFor(ctx, rv); err != nil {
				return nil, err
			}
		case readExact:
			if rv > r.store.ResourceVersion() {
				if err := r.freshness.waitFor(ctx, rv); err != nil {
					return nil, err
				}
			}
			if rv != r.store.ResourceVersion() {
				lo.SnapshotRV = rv
			}
		}
	}
	res, err := r.store.List(location, lo)
	if err != nil {
		if opts.Continue == "" && apierrors.IsResourceExpired(err) {
			// resourceVersionMatch=Exact at a version whose snapshot is no longer kept.
			return nil, exactTooOld()
		}
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return nil, err
		}
		return nil, apierrors.NewInternalError(err)
	}
	list := &List{
		TypeMeta: metav1.TypeMeta{APIVersion: r.info.GVR.GroupVersion().String(), Kind: r.info.ListKind},
		ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(res.ResourceVersion, 10)},
		Items:    make([]runtime.Object, len(res.Items)),
	}
	for i, o := range res.Items {
		list.Items[i] = o
	}
	if res.More && len(res.Items) > 0 {
		token, err := encodeContinue(res.Items[len(res.Items)-1].Key(), res.ResourceVersion)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		list.Continue = token
		list.RemainingItemCount = res.RemainingItemCount
	}
	return list, nil
}

// Watch streams the location's events for this resource, with kube-apiserver's semantics:
//   - sendInitialEvents=true (streaming list, KEP-3157): ADDED for the current state, then a
//     bookmark annotated k8s.io/initial-events-end, then changes; with resourceVersion "" the
//     state is first proven fresh as for a consistent list;
//   - resourceVersion "" or "0": ADDED for the current state, then changes;
//   - resourceVersion N: every change after N (from the kept history; older than the history
//     answers 410 Gone "too old resource version"), then live changes.
//
// An object that gains the location (or starts matching the selectors) arrives as ADDED, one
// that loses it as DELETED, as a label-selector watch on kube-apiserver would show it.
func (r *resourceStorage) Watch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	location, _ := LocationFrom(ctx)
	namespace := genericapirequest.NamespaceValue(ctx)
	mode, rv, err := parseResourceVersion(opts.ResourceVersion, opts.ResourceVersionMatch)
	if err != nil {
		return nil, err
	}
	wo := cache.WatchOptions{AllowBookmarks: opts.AllowWatchBookmarks, Predicate: listPredicate(namespace, opts), Part: PartFrom(ctx)}
	sendInitialEvents := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	switch {
	case sendInitialEvents || mode == readConsistent || mode == readAny:
		wo.InitialEvents = true
		// As kube-apiserver's cacher: the bookmark ending the initial events is sent to a
		// streaming list (sendInitialEvents and allowWatchBookmarks). A plain watch from ""
		// or "0" is given sendInitialEvents by the server's own defaulting
		// (SetListOptionsDefaults) and gets no such bookmark.
		wo.InitialEventsEndBookmark = sendInitialEvents && opts.AllowWatchBookmarks
		switch mode {
		case readConsistent:
			err = r.freshness.waitConsistent(ctx)
		case readNotOlderThan:
			err = r.freshness.waitFor(ctx, rv)
		}
		if err != nil && ctx.Err() != nil {
			// The watch's own timeout (timeoutSeconds, also 0 or negative) passed before it
			// started: it ends at once with no events, as kube-apiserver's watch does (200).
			return watch.NewEmptyWatch(), nil
		}
		if err != nil {
			return nil, err
		}
	default:
		wo.ResourceVersion = rv
		if err := r.freshness.waitFor(ctx, rv); err != nil {
			if ctx.Err() != nil {
				return watch.NewEmptyWatch(), nil
			}
			return nil, err
		}
	}
	return r.store.Watch(ctx, location, wo)
}

// notFound is the 404 of an object absent from this location's view: assigned elsewhere is
// indistinguishable from absent.
func (r *resourceStorage) notFound(name string) error {
	return apierrors.NewNotFound(r.info.GVR.GroupResource(), name)
}
