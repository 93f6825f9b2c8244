package cache

import (
	"bytes"
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Object is one immutable cached object version.
//
// An Object is never mutated after it was stored: every List, Get and watch event that shows
// this version of the source object shares the same *Object. It implements
//
//   - runtime.Object (GetObjectKind delegates to the wrapped unstructured object, DeepCopyObject
//     returns a deep copy of it as *unstructured.Unstructured);
//   - runtime.CacheableObject: CacheEncode runs each encoder (runtime.Identifier) at most once
//     per Object and replays the cached bytes afterwards, exactly like the cachingObject of
//     kube-apiserver's cacher (k8s.io/apiserver/pkg/storage/cacher/caching_object.go). The
//     apiserver's watch encoder caches a whole watch frame per event type this way, so an
//     event delivered to many watchers is encoded once;
//   - json.Marshaler: MarshalJSON encodes the object once (lazily) and returns the cached JSON,
//     which serves list responses;
//   - metav1.ObjectMetaAccessor: GetObjectMeta returns the wrapped unstructured object.
//
// The unstructured object returned by Unstructured, GetObject and GetObjectMeta is shared and
// READ-ONLY: callers must copy it (DeepCopyObject) before changing anything.
type Object struct {
	key       contract.Key
	cluster   string
	namespace string
	name      string
	// locations are the locations whose views show this version: assigned minus those it is
	// withheld from (render.go).
	locations []string
	// assigned are the locations of kcp.io/assigned-locations; the same slice as locations
	// unless the object is withheld from some.
	assigned []string
	// rendered, when not nil, holds per location that a Customization or the object's own
	// spec-diff.kcp.io/<location> patch touches the rendering of this version (render.go).
	rendered map[string]*unstructured.Unstructured
	// lastGood, when not nil, holds per location whose rendering failed on this version the
	// last rendering of the object that succeeded (render.go).
	lastGood map[string]*unstructured.Unstructured
	// failed, when not nil, holds per location whose rendering failed on this version the
	// error; a failing location without a lastGood rendering is withheld from its view.
	failed map[string]error
	// rv is the resourceVersion the object shows (metadata.resourceVersion of u): the source's,
	// or for a location's view the location's visible resourceVersion (VisibleResourceVersion).
	rv       uint64
	rvString string
	// sourceRV is the source's resourceVersion of this object version.
	sourceRV uint64
	u        *unstructured.Unstructured
	// source, when not nil, is the object as the source holds it, of which u is a shallow copy
	// with kcp.io/cluster set (a plain source; see SourceObject).
	source *unstructured.Unstructured
	labels labels.Set
	fields fields.Set

	// serializations caches CacheEncode results: map[runtime.Identifier]*serialization,
	// replaced (copy on insert) under encodeMu so that lookups are lock-free.
	serializations atomic.Pointer[map[runtime.Identifier]*serialization]
	encodeMu       sync.Mutex

	jsonOnce sync.Once
	json     []byte
	jsonErr  error

	// variants, when not nil, holds the per-location copies of an object whose view differs
	// per location (see ForLocation).
	variants *locationVariants
	// statusDiffers: the object's .status differs per location (status records, or status
	// reflection across several locations); the status record reconciler visits these only
	// (ResourceStore.StatusObjects).
	statusDiffers bool
	// visible, when not nil, holds the visible resourceVersions of the locations whose view
	// did not change at this version (see VisibleResourceVersion); set by setVisibility before
	// the object is published.
	visible *visibleVersions
}

// serialization is one cached encoder output.
type serialization struct {
	once sync.Once
	raw  []byte
	err  error
}

var (
	_ runtime.Object                             = &Object{}
	_ runtime.CacheableObject                    = &Object{}
	_ metav1.ObjectMetaAccessor                  = &Object{}
	_ interface{ MarshalJSON() ([]byte, error) } = &Object{}
)

// newObject wraps u, which must not be changed afterwards, into an Object with the given
// identity and locations. rv is the parsed metadata.resourceVersion of u.
func newObject(key contract.Key, cluster, namespace, name string, locations []string, rv uint64, u *unstructured.Unstructured) *Object {
	o := &Object{
		key:       key,
		cluster:   cluster,
		namespace: namespace,
		name:      name,
		locations: locations,
		assigned:  locations,
		rv:        rv,
		rvString:  u.GetResourceVersion(),
		sourceRV:  rv,
		u:         u,
		labels:    labels.Set(u.GetLabels()),
		fields:    fields.Set{"metadata.name": name, "metadata.namespace": namespace},
	}
	if needsVariants(u, locations) {
		o.variants = &locationVariants{}
		o.statusDiffers = statusDiffers(u, locations)
	}
	return o
}

// withResourceVersion returns a new Object with the content of o but metadata.resourceVersion
// set to rv. kube-apiserver's cacher sends such a copy of the previous object state in the
// DELETED event of a watcher whose selector the object stopped matching.
func (o *Object) withResourceVersion(rv uint64) *Object {
	u := o.u.DeepCopy()
	u.SetResourceVersion(strconv.FormatUint(rv, 10))
	c := newObject(o.key, o.cluster, o.namespace, o.name, o.assigned, rv, u)
	c.locations, c.rendered, c.lastGood, c.failed = o.locations, o.rendered, o.lastGood, o.failed
	return c
}

// Key returns the object's key ("cluster|namespace/name", see contract.Key).
func (o *Object) Key() contract.Key { return o.key }

// Cluster returns the object's logical cluster (annotation kcp.io/cluster, else the store's
// default cluster).
func (o *Object) Cluster() string { return o.cluster }

// Namespace returns the object's namespace ("" for cluster-scoped resources).
func (o *Object) Namespace() string { return o.namespace }

// Name returns the object's name.
func (o *Object) Name() string { return o.name }

// Locations returns the sorted, de-duplicated locations the object is assigned to; nil when the
// object is unassigned or its kcp.io/assigned-locations annotation is malformed. It includes
// the locations the version is withheld from (Withheld). The slice is shared and must not be
// changed.
func (o *Object) Locations() []string { return o.assigned }

// HasLocation reports whether location's view shows the object: it is assigned to location
// and not withheld from it.
func (o *Object) HasLocation(location string) bool {
	return contract.HasLocation(o.locations, location)
}

// ResourceVersion returns the object's metadata.resourceVersion as a number (0 if it is not a
// number): the source's resourceVersion, or for a location's view (ForLocation) the location's
// visible resourceVersion (VisibleResourceVersion).
func (o *Object) ResourceVersion() uint64 { return o.rv }

// SourceObject returns a deep copy of the object as the source holds it, which the caller owns:
// on a plain source without the kcp.io/cluster annotation the cache added (or with the value a
// user wrote), so that a write built from it changes nothing but what the writer meant to.
func (o *Object) SourceObject() *unstructured.Unstructured {
	if o.source != nil {
		return o.source.DeepCopy()
	}
	return o.u.DeepCopy()
}

// Unstructured returns the object's content. It is shared by all readers: READ-ONLY.
func (o *Object) Unstructured() *unstructured.Unstructured { return o.u }

// Labels returns the object's labels for label-selector matching. Shared: READ-ONLY.
func (o *Object) Labels() labels.Set { return o.labels }

// Fields returns the object's selectable fields, "metadata.name" and "metadata.namespace"
// (the field selectors a location view supports, DESIGN.md). Shared: READ-ONLY.
func (o *Object) Fields() fields.Set { return o.fields }

// GetObjectKind implements runtime.Object by delegating to the wrapped object.
func (o *Object) GetObjectKind() schema.ObjectKind { return o.u.GetObjectKind() }

// DeepCopyObject implements runtime.Object: it returns a deep copy of the wrapped object as
// *unstructured.Unstructured, which the caller owns.
func (o *Object) DeepCopyObject() runtime.Object { return o.u.DeepCopy() }

// GetObjectMeta implements metav1.ObjectMetaAccessor (so meta.Accessor works on an *Object).
// It returns the shared wrapped object: READ-ONLY.
func (o *Object) GetObjectMeta() metav1.Object { return o.u }

// GetObject implements runtime.CacheableObject. Unlike the cacher's cachingObject it returns
// the shared wrapped object, not a copy: encoders must not change it (encoders of
// unstructured objects whose GVK already is the target GVK do not).
func (o *Object) GetObject() runtime.Object { return o.u }

// CacheEncode implements runtime.CacheableObject: the first call for an identifier runs encode
// on the wrapped object and caches the result (bytes or error); every call writes the cached
// bytes to w (using runtime.Splice when w supports it, like the cacher).
func (o *Object) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	s := o.serialization(id)
	s.once.Do(func() {
		var buf bytes.Buffer
		s.err = encode(o.u, &buf)
		s.raw = buf.Bytes()
	})
	if s.err != nil {
		return s.err
	}
	if sp, ok := w.(runtime.Splice); ok {
		sp.Splice(s.raw)
		return nil
	}
	_, err := w.Write(s.raw)
	return err
}

// serialization returns the cache slot for id, creating it if needed.
func (o *Object) serialization(id runtime.Identifier) *serialization {
	if m := o.serializations.Load(); m != nil {
		if s, ok := (*m)[id]; ok {
			return s
		}
	}
	o.encodeMu.Lock()
	defer o.encodeMu.Unlock()
	old := o.serializations.Load()
	if old != nil {
		if s, ok := (*old)[id]; ok {
			return s
		}
	}
	n := make(map[runtime.Identifier]*serialization, 1)
	if old != nil {
		for k, v := range *old {
			n[k] = v
		}
	}
	s := &serialization{}
	n[id] = s
	o.serializations.Store(&n)
	return s
}

// MarshalJSON implements json.Marshaler: the object's JSON, encoded on first use and cached.
// The returned slice is shared: do not change it.
func (o *Object) MarshalJSON() ([]byte, error) {
	o.jsonOnce.Do(func() {
		o.json, o.jsonErr = o.u.MarshalJSON()
	})
	return o.json, o.jsonErr
}
