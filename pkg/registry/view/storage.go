package view

import (
	"context"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
)

// maxQuoted is how many bytes of a client- or source-supplied value a Status message repeats
// (contract.Truncate): a hostile value never becomes a huge error response or log line.
const maxQuoted = 256

// Source is what a view needs of the source API server besides the cache: its current
// resourceVersion (to prove the cache fresh for a consistent read) and a live GET.
// *cache.Cache implements it.
type Source interface {
	// SourceResourceVersion returns the source's current resourceVersion for gvr.
	SourceResourceVersion(ctx context.Context, gvr schema.GroupVersionResource) (uint64, error)
	// SourceGet reads one object of a logical cluster from the source (not from the cache).
	SourceGet(ctx context.Context, gvr schema.GroupVersionResource, cluster, namespace, name string) (*unstructured.Unstructured, error)
}

// resourceStorage serves one mirrored resource of a location view: rest.Getter, rest.Lister,
// rest.Watcher and rest.TableConvertor over a cache.ResourceStore. The location comes from the
// request context (LocationFrom); one resourceStorage serves every location.
type resourceStorage struct {
	info   cache.ResourceInfo
	store  *cache.ResourceStore
	source Source
	// freshnessTimeout bounds how long a read waits for the cache to reach a resourceVersion.
	freshnessTimeout time.Duration
	// consistentReadWait bounds how long a consistent read waits for the cache to prove it
	// caught up with the source (waitConsistent).
	consistentReadWait time.Duration
	table              tableConvertor
	clusters           clusters
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
// with the view's watches). On a kcp source's all-clusters path the cluster is the cache's only
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
				if err := r.waitConsistent(ctx); err != nil {
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
		src, err := r.source.SourceGet(ctx, r.info.GVR, cluster, namespace, name)
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
		if err := r.waitFor(ctx, srcRV); err != nil {
			return nil, err
		}
	case readNotOlderThan:
		if err := r.waitFor(ctx, rv); err != nil {
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
	lo := cache.ListOptions{Limit: opts.Limit, Predicate: listPredicate(namespace, opts), Cluster: ClusterFrom(ctx)}
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
			if err := r.waitConsistent(ctx); err != nil {
				return nil, err
			}
		case readNotOlderThan:
			if err := r.waitFor(ctx, rv); err != nil {
				return nil, err
			}
		case readExact:
			if rv > r.store.ResourceVersion() {
				if err := r.waitFor(ctx, rv); err != nil {
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
	wo := cache.WatchOptions{AllowBookmarks: opts.AllowWatchBookmarks, Predicate: listPredicate(namespace, opts), Cluster: ClusterFrom(ctx)}
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
			err = r.waitConsistent(ctx)
		case readNotOlderThan:
			err = r.waitFor(ctx, rv)
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
		if err := r.waitFor(ctx, rv); err != nil {
			if ctx.Err() != nil {
				return watch.NewEmptyWatch(), nil
			}
			return nil, err
		}
	}
	return r.store.Watch(ctx, location, wo)
}

// waitFor waits until the cache has processed the source up to rv. After freshnessTimeout it
// answers 504 "Too large resource version" with a retry hint, as kube-apiserver's watch cache does.
func (r *resourceStorage) waitFor(ctx context.Context, rv uint64) error {
	if r.store.ResourceVersion() >= rv {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, r.freshnessTimeout)
	defer cancel()
	if err := r.store.WaitForResourceVersion(wctx, rv); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return storage.NewTooLargeResourceVersionError(rv, r.store.ResourceVersion(), 1)
	}
	return nil
}

// waitConsistent makes a read with resourceVersion "" include every source write that completed
// before it: it reads the source's current resourceVersion R (one coalesced limit=1 LIST) and
// waits until the cache has processed the source's events up to R.
//
// The cache's resourceVersion for a resource advances with that resource's events and with the
// source's bookmarks, and kube-apiserver sends a watcher bookmarks only about once a minute. So
// for a resource with no writes since R's predecessors the cache cannot prove it reached R
// before the wait (consistentReadWait) ends. In that case the read is served at the cache's own resourceVersion
// (the response's resourceVersion says which state it shows) and counted in
// mapper_apiserver_view_unproven_consistent_reads_total: every write whose watch event reached
// the server before the request is included. The source being unreachable is a 503.
func (r *resourceStorage) waitConsistent(ctx context.Context) error {
	want, err := r.source.SourceResourceVersion(ctx, r.info.GVR)
	if err != nil {
		return sourceError(err)
	}
	if r.store.ResourceVersion() >= want {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, r.consistentReadWait)
	defer cancel()
	if err := r.store.WaitForResourceVersion(wctx, want); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		unprovenConsistentReads.WithLabelValues(r.info.GVR.GroupResource().String()).Inc()
	}
	return nil
}

// notFound is the 404 of an object absent from this location's view: assigned elsewhere is
// indistinguishable from absent.
func (r *resourceStorage) notFound(name string) error {
	return apierrors.NewNotFound(r.info.GVR.GroupResource(), name)
}
