package view

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationevents"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// Options tunes how views serve.
type Options struct {
	// FreshnessTimeout bounds how long a read waits for the cache to reach a resourceVersion it
	// asked for before answering 504 (default 3s, as kube-apiserver's watch cache).
	FreshnessTimeout time.Duration
	// ConsistentReadWait bounds how long a read with resourceVersion "" waits for the cache to
	// prove it reached the source's current resourceVersion before it is served at the cache's
	// own (see resourceStorage.waitConsistent; default 50ms: source events normally reach the
	// cache within a few milliseconds).
	ConsistentReadWait time.Duration
	// MinRequestTimeout bounds how long a view watch stays open: randomized in
	// [MinRequestTimeout, 2*MinRequestTimeout) as in kube-apiserver (--min-request-timeout), and
	// unlike kube-apiserver a client's larger timeoutSeconds is reduced to it (capWatchTimeout),
	// so a revoked permission ends every open watch within 2*MinRequestTimeout (default 1800s).
	MinRequestTimeout time.Duration
	// PlainCluster is the one logical cluster of a plain source (--cluster-name); "" for a kcp
	// source, whose objects name their cluster in kcp.io/cluster (docs/design.md, "Names"). It
	// decides which cluster a request by name on the all-clusters path reads and writes.
	PlainCluster string
	// MaxWatchesPerUser bounds the concurrent watches of one user on one location's view; past
	// it a watch is answered 429 (watchLimiter). 0 means no limit.
	MaxWatchesPerUser int
	// OutcomeRecorded, when not nil, is called after a location's write through its view set
	// its apply outcome record on an object with a reason the object's record of that location
	// did not have (docs/mapper.md, "Outcome records"), so that it becomes an Event at the
	// source (locationevents.Recorder.Recorded). It must not block.
	OutcomeRecorded func(locationevents.Outcome)
}

// Views serves every location's view from one cache. It is safe for concurrent use.
type Views struct {
	objects    Objects
	source     Source
	opts       Options
	serializer *serializer
	namespaces *resourceHandlers
	discovery  *viewDiscovery
	// openapi serves the views' OpenAPI; nil when the source gives none.
	openapi *viewOpenAPI
	watches *watchLimiter

	mu        sync.Mutex
	resources map[schema.GroupVersionResource]*resourceHandlers
}

// resourceHandlers are the endpoint handlers of one mirrored resource, built once per store.
type resourceHandlers struct {
	store Store
	scope *handlers.RequestScope
	get   http.Handler
	list  http.Handler // list, and watch with ?watch=true
	// watch serves watches, also those of the legacy /watch/ paths, which carry no watch=true
	// (forceWatch, as kube-apiserver's installer registers them); nil where there is no watch.
	watch http.Handler
	// updateStatus and patchStatus write /status (status write-back); nil for namespaces.
	updateStatus http.Handler
	patchStatus  http.Handler
	// updateMarks and patchMarks write the object itself: the location's own marks
	// (marksStorage) or its related copies (objectWrites); nil for namespaces.
	updateMarks http.Handler
	patchMarks  http.Handler
	// create and delete create and delete the location's related copies (objectWrites); nil
	// for namespaces.
	create http.Handler
	delete http.Handler
}

// New returns the views over c.
func New(objects Objects, src Source, opts Options) *Views {
	if opts.FreshnessTimeout <= 0 {
		opts.FreshnessTimeout = 3 * time.Second
	}
	if opts.ConsistentReadWait <= 0 {
		opts.ConsistentReadWait = 50 * time.Millisecond
	}
	if opts.MinRequestTimeout <= 0 {
		opts.MinRequestTimeout = 1800 * time.Second
	}
	v := &Views{objects: objects, source: src, opts: opts, serializer: newSerializer(), discovery: newViewDiscovery(objects), watches: newWatchLimiter(opts.MaxWatchesPerUser), resources: map[schema.GroupVersionResource]*resourceHandlers{}}
	if o, ok := src.(OpenAPI); ok {
		v.openapi = newViewOpenAPI(objects, o)
	}
	ns := &namespaceStorage{objects: objects, tableConvertor: newTableConvertor(src, namespacesGVR, "Namespace")}
	scope := newRequestScope(namespacesGVR, "Namespace", false, v.serializer, ns)
	v.namespaces = &resourceHandlers{
		scope: scope,
		get:   handlers.GetResource(ns, scope),
		list:  handlers.ListResource(ns, nil, scope, false, opts.MinRequestTimeout),
	}
	RegisterMetrics()
	return v
}

// ServeView serves one request inside the view of location; innerPath is the part of the URL
// below the view's base URL. The outer request has been authenticated and authorized already.
// An inner path that starts with /clusters/<cluster> serves only that logical cluster's objects
// (discovery, get, list, watch, status writes, namespaces), one with /clusters/<c>,<c>,... those
// of the listed clusters, and one with /shards/<i>-of-<n> (after the clusters, if any) those of
// a hash shard (docs/views.md, "Shards"); the base path serves all of them.
//
// Reads (get, list, watch) of mirrored resources, discovery and OpenAPI (viewOpenAPI) are
// served, writes of a resource's /status subresource (status write-back, see statusStorage),
// updates and patches of an object itself that change only the location's own marks
// (marksStorage), and creates, updates, patches and deletes of the location's related copies
// (objectWrites); every other write is refused with 405 MethodNotAllowed (or 403, 404 as
// objectWrites says); unknown paths and resources are 404.
func (v *Views) ServeView(w http.ResponseWriter, req *http.Request, location, innerPath string) {
	inner, err := contract.ParseInnerRequestOf(req, innerPath)
	if err != nil {
		v.writeError(w, req, pathNotFound(innerPath, err))
		return
	}
	info := inner.Info
	if !v.objects.Discovered() {
		// Not known which resources the view serves (the server is starting, or shutting down
		// and its cache stopped): no 404 (a mapper takes a 404 for "gone" and may delete its
		// copy), no empty discovery.
		err := apierrors.NewServiceUnavailable("mapper-apiserver does not know the source's resources now: it is starting, or shutting down")
		err.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: 1}
		v.writeError(w, req, err)
		return
	}
	// The part (clusters, hash shard) only narrows what the location's view shows
	// (docs/design.md, "The location view"): every read and write below still goes through the
	// location's index, so a part's path never leaves the location.
	ctx := withPart(withLocation(req.Context(), location), inner.Part)
	if !info.IsResourceRequest && v.openapi != nil && isOpenAPIPath(info.Path) {
		req = req.WithContext(ctx)
		v.openapi.serve(w, req, info.Path, func(err error) { v.writeError(w, req, err) })
		return
	}
	if !info.IsResourceRequest {
		v.discovery.serve(w, req.WithContext(ctx), info.Path)
		return
	}
	ctx = request.WithNamespace(request.WithRequestInfo(ctx, info), info.Namespace)
	req = req.WithContext(ctx)

	gvr := schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource}
	if err := validatePathSegments(info, gvr.GroupResource()); err != nil {
		v.writeError(w, req, err)
		return
	}
	h, ok := v.handlers(gvr)
	if !ok {
		v.writeError(w, req, apierrors.NewNotFound(gvr.GroupResource(), info.Name))
		return
	}
	if info.Subresource != "" && info.Subresource != "status" {
		v.writeError(w, req, apierrors.NewNotFound(gvr.GroupResource(), info.Name+"/"+info.Subresource))
		return
	}
	if err := v.waitSynced(ctx, gvr); err != nil {
		v.writeError(w, req, err)
		return
	}
	if info.Verb == "watch" {
		user := ""
		if u, ok := request.UserFrom(ctx); ok {
			user = u.GetName()
		}
		release, err := v.watches.acquire(user, location)
		if err != nil {
			v.writeError(w, req, err)
			return
		}
		defer release()
		query := req.URL.Query()
		capWatchTimeout(query, v.opts.MinRequestTimeout, randomFloat)
		u := *req.URL
		u.RawQuery = query.Encode()
		req.URL = &u
	}
	switch {
	case info.Verb == "get":
		h.get.ServeHTTP(w, req)
	case info.Subresource == "" && info.Verb == "watch" && h.watch != nil:
		h.watch.ServeHTTP(w, req)
	case info.Subresource == "" && (info.Verb == "list" || info.Verb == "watch"):
		h.list.ServeHTTP(w, req)
	case info.Subresource == "status" && info.Verb == "update" && h.updateStatus != nil:
		h.updateStatus.ServeHTTP(w, req)
	case info.Subresource == "status" && info.Verb == "patch" && h.patchStatus != nil:
		h.patchStatus.ServeHTTP(w, req)
	case info.Subresource == "" && info.Verb == "update" && h.updateMarks != nil:
		h.updateMarks.ServeHTTP(w, req)
	case info.Subresource == "" && info.Verb == "patch" && h.patchMarks != nil:
		h.patchMarks.ServeHTTP(w, req)
	case info.Subresource == "" && info.Verb == "create" && h.create != nil:
		h.create.ServeHTTP(w, req)
	case info.Subresource == "" && info.Verb == "delete" && h.delete != nil:
		h.delete.ServeHTTP(w, req)
	default:
		v.writeError(w, req, readOnly(gvr.GroupResource(), info.Verb, location))
	}
}

// handlers returns the endpoint handlers of a resource served in views, building them the first
// time and again when the cache replaced the resource's store (a CRD deleted and re-created).
func (v *Views) handlers(gvr schema.GroupVersionResource) (*resourceHandlers, bool) {
	if gvr == namespacesGVR {
		return v.namespaces, true
	}
	store, ok := v.objects.Store(gvr)
	if !ok {
		return nil, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if h, ok := v.resources[gvr]; ok && h.store == store {
		return h, true
	}
	var info source.ResourceInfo
	for _, r := range v.objects.Resources() {
		if r.GVR == gvr {
			info = r
		}
	}
	if info.Kind == "" {
		return nil, false
	}
	fresh := freshness{gvr: gvr, store: store, source: v.source, timeout: v.opts.FreshnessTimeout, consistentReadWait: v.opts.ConsistentReadWait}
	st := &resourceStorage{info: info, store: store, source: v.source, freshness: fresh,
		table: newTableConvertor(v.source, gvr, info.Kind), clusters: clusters{plain: v.opts.PlainCluster}}
	scope := newRequestScope(gvr, info.Kind, info.Namespaced, v.serializer, st)
	h := &resourceHandlers{
		store: store,
		scope: scope,
		get:   handlers.GetResource(st, scope),
		list:  handlers.ListResource(st, st, scope, false, v.opts.MinRequestTimeout),
		watch: handlers.ListResource(st, st, scope, true, v.opts.MinRequestTimeout),
	}
	ss := &statusStorage{info: info, store: store, source: v.source, clusters: clusters{plain: v.opts.PlainCluster}, freshness: fresh}
	if statusScope, err := newWriteScope(info, v.serializer, "status"); err != nil {
		klog.ErrorS(err, "status writes are disabled for the resource", "resource", gvr)
	} else {
		h.updateStatus = handlers.UpdateResource(ss, statusScope, nil)
		h.patchStatus = handlers.PatchResource(ss, statusScope, nil, statusPatchTypes(info))
	}
	if marksScope, err := newWriteScope(info, v.serializer, ""); err != nil {
		klog.ErrorS(err, "finalizer writes are disabled for the resource", "resource", gvr)
	} else {
		ow := &objectWrites{marks: &marksStorage{st: ss, recorded: v.opts.OutcomeRecorded}, rules: relatedRules{info: info, objects: v.objects}}
		h.updateMarks = handlers.UpdateResource(ow, marksScope, nil)
		h.patchMarks = handlers.PatchResource(ow, marksScope, nil, statusPatchTypes(info))
		h.create = handlers.CreateResource(ow, marksScope, nil)
		h.delete = handlers.DeleteResource(ow, true, marksScope, nil)
	}
	v.resources[gvr] = h
	return h, true
}

// writeError writes err as a Kubernetes Status in the format the client asked for.
func (v *Views) writeError(w http.ResponseWriter, req *http.Request, err error) {
	responsewriters.ErrorNegotiated(err, v.serializer, schema.GroupVersion{Version: "v1"}, w, req)
}

// readOnly is the 405 of a write through a view.
func readOnly(gr schema.GroupResource, verb, location string) error {
	err := apierrors.NewMethodNotSupported(gr, verb)
	err.ErrStatus.Message = fmt.Sprintf("location views are read-only: %s of %s is not allowed through the view of location %q; change the object in the source cluster instead", verb, gr.String(), location)
	return err
}
