package cache

import (
	"fmt"
	"io"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/rawjson"
)

// Object is one immutable cached object version.
//
// An Object is never mutated after it was stored: every List, Get and watch event that shows
// this version of the source object shares the same *Object. Its representation is bytes:
// the JSON the views serve, encoded once when the version is stored, plus the
// parsed metadata the index and the selectors read (key, cluster, namespace, name, uid,
// labels, resourceVersion, locations). The decoded tree is kept only where a reader needs it
// again and again: for an object whose .status differs per location (the status record
// reconciler reads it on every pass). Everywhere else (tables, customization re-rendering,
// comparisons with the next version) it is decoded from the bytes on demand; the LIST and
// watch paths never decode.
//
// A per-location view of the object (ForLocation) is an Object too, rendered and encoded once
// per object version and location, and kept as bytes only.
//
// It implements
//
//   - runtime.Object (GetObjectKind returns a copy of the object's apiVersion and kind,
//     DeepCopyObject a decoded *unstructured.Unstructured the caller owns);
//   - runtime.CacheableObject: CacheEncode runs each encoder (runtime.Identifier) at most once
//     per Object and replays the cached bytes afterwards, exactly like the cachingObject of
//     kube-apiserver's cacher (k8s.io/apiserver/pkg/storage/cacher/caching_object.go). The
//     apiserver's watch encoder caches a whole watch frame per event type this way, so an
//     event delivered to many watchers is encoded once. The encoders are handed the object's
//     JSON bytes (jsonObject), not a decoded tree;
//   - json.Marshaler: MarshalJSON returns the cached JSON, which serves list responses;
//   - metav1.ObjectMetaAccessor: GetObjectMeta returns the decoded object (READ-ONLY).
type Object struct {
	key       contract.Key
	cluster   string
	namespace string
	name      string
	uid       types.UID
	typeMeta  metav1.TypeMeta
	// locations are the locations whose views show this version: assigned minus those it is
	// withheld from (render.go).
	locations []string
	// assigned are the locations of kcp.io/assigned-locations; the same slice as locations
	// unless the object is withheld from some or shown for its finalizer alone (deletion.go).
	assigned []string
	// marks, when not nil, are the object's finalizers and deletion as the deletion protocol
	// reads them (deletion.go).
	marks *deletionMarks
	// rendered, when not nil, holds per location that a Customization or the object's own
	// spec-diff.kcp.io/<location> patch touches the rendering of this version (render.go).
	rendered map[string]*unstructured.Unstructured
	// lastGood, when not nil, holds per location whose rendering failed on this version, or is
	// pending, the last rendering of the object that its view showed (render.go).
	lastGood map[string]*unstructured.Unstructured
	// failed, when not nil, holds per location whose rendering of this version is not made
	// the reason: the error it failed with, or errRenderingPending while a Renderer has yet to
	// make it (render.go, renderer.go; one map for both keeps Object in its allocation size
	// class). Such a location's view shows lastGood; one without is withheld.
	failed map[string]error
	// rv is the resourceVersion the object shows (metadata.resourceVersion of u): the source's,
	// or for a location's view the location's visible resourceVersion (VisibleResourceVersion).
	rv       uint64
	rvString string
	// generation is metadata.generation of u (0: none): the source's, or for a location's view
	// the generation the view shows (VisibleGeneration).
	generation int64
	// sourceRV is the source's resourceVersion of this object version.
	sourceRV uint64
	// u is the decoded object until compact drops it (see content); nil afterwards unless the
	// object's status differs per location.
	u *unstructured.Unstructured
	// base and fill, for a view made from its object's JSON (templateView): this view's JSON
	// is base's with the assignment value (base.hole) replaced by fill; json is unused.
	base *Object
	fill []byte
	// hole, when set (end > 0), says where the value of kcp.io/assigned-locations is in json:
	// the views of the object are json with it replaced (template.go).
	hole assignmentHole
	// more, when not nil, holds the other holes of a template (finalizers, resourceVersion),
	// or in a template view their fills (template.go).
	more *templateHoles
	// sourceJSON says json is the source's bytes of this version (buildFromJSON, or build for
	// a version it decoded), so that two such versions of an object are written in the same
	// field order and can be compared as bytes (templateSuccessor).
	sourceJSON bool
	// everyViewChanged says every location that held the previous version sees this one
	// changed (at the same generation, so a change of .status counts as any other):
	// buildFromJSON found it from the bytes (templateSuccessor), so setVisibility need not
	// decode both versions.
	everyViewChanged bool
	// edit, when not nil, says how the object differs from the source's on a plain source: the
	// cache set kcp.io/cluster (identify). SourceObject undoes it.
	edit   *clusterEdit
	labels objectLabels

	// encodings caches CacheEncode results.
	encodings encodeCache

	jsonOnce sync.Once
	json     rawjson.Compact
	jsonErr  error

	// variants, when not nil, holds the per-location copies of an object whose view differs
	// per location (see ForLocation).
	variants *locationVariants
	// dropped says the Object is the header of a version whose content the history does not
	// keep (header, history.go): it is never sent to a client.
	dropped bool
	// statusDiffers: the object's .status differs per location (status records, or status
	// reflection across several locations): its views cannot share one template.
	statusDiffers bool
	// visible, when not nil, holds the visible resourceVersions of the locations whose view
	// did not change at this version (see VisibleResourceVersion); set by setVisibility before
	// the object is published.
	visible *visibleVersions
}

// clusterEdit records what the source object had where the cache wrote kcp.io/cluster on a
// plain source.
type clusterEdit struct {
	// hadAnnotations: the source object had metadata.annotations.
	hadAnnotations bool
	// had and value: the source object's own kcp.io/cluster annotation, if it had one.
	had   bool
	value string
}

// The edits of almost every object of a plain source, shared.
var (
	addedClusterNoAnnotations = &clusterEdit{}
	addedCluster              = &clusterEdit{hadAnnotations: true}
)

// editFor returns the clusterEdit of an object as the source sent it: hadAnnotations says it
// has metadata.annotations, had that one of them is kcp.io/cluster, with value.
func editFor(hadAnnotations, had bool, value string) *clusterEdit {
	switch {
	case !hadAnnotations:
		return addedClusterNoAnnotations
	case !had:
		return addedCluster
	}
	return &clusterEdit{hadAnnotations: true, had: true, value: value}
}

// undo changes u (a decoded copy of the shown object, owned by the caller) back into the
// source's object.
func (e *clusterEdit) undo(u *unstructured.Unstructured) {
	ann := u.GetAnnotations()
	switch {
	case e.had:
		ann[contract.ClusterAnnotation] = e.value
	default:
		delete(ann, contract.ClusterAnnotation)
	}
	if len(ann) == 0 && !e.hadAnnotations {
		unstructured.RemoveNestedField(u.Object, "metadata", "annotations")
		return
	}
	u.SetAnnotations(ann)
}

var (
	_ runtime.Object                             = &Object{}
	_ runtime.CacheableObject                    = &Object{}
	_ metav1.ObjectMetaAccessor                  = &Object{}
	_ interface{ MarshalJSON() ([]byte, error) } = &Object{}
)

// newObject wraps u, which must not be changed afterwards, into an Object with the given
// identity and locations. rv is the parsed metadata.resourceVersion of u. The Object keeps u
// until compact.
func newObject(key contract.Key, cluster, namespace, name string, locations []string, rv uint64, u *unstructured.Unstructured) *Object {
	marks := marksOfObject(u)
	o := &Object{
		key:        key,
		cluster:    cluster,
		namespace:  namespace,
		name:       name,
		uid:        u.GetUID(),
		typeMeta:   metav1.TypeMeta{APIVersion: u.GetAPIVersion(), Kind: u.GetKind()},
		locations:  marks.viewLocations(locations, locations),
		assigned:   locations,
		marks:      marks,
		rv:         rv,
		rvString:   u.GetResourceVersion(),
		generation: u.GetGeneration(),
		sourceRV:   rv,
		u:          u,
		labels:     newObjectLabels(u.GetLabels(), nil),
	}
	if needsVariants(u, locations, marks) {
		o.variants = &locationVariants{}
		o.statusDiffers = statusDiffers(u, locations)
	}
	return o
}

// compact turns o, the version after prev (nil for a new object or none to share with), into
// its stored form before it is published (called once, by the store's writer, while no reader
// has o), and drops the decoded tree. On an encoding error the tree is kept, and encoders
// report the error when they run.
//
//   - An object whose views differ in the assignment only (templatable) keeps its JSON; its
//     views are made from it when read, without copies (templateView, template.go).
//   - Any other object with per-location views gets each view rendered and encoded now
//     (ForLocation), so that no LIST or watch renders or encodes it later; its own JSON is
//     kept for decoding on demand.
//
// A location whose view did not change at o (setVisibility: for instance a status write of
// another location) shares the bytes of prev's view, which are the same, resourceVersion
// included: so a status write renders and encodes the writer's view only, and the versions of
// an object share what did not change.
func (o *Object) compact(prev *Object) {
	if o.variants != nil && o.templatable(o.u) {
		if raw, err := o.MarshalJSON(); err == nil {
			if h, ok := findAssignmentHole(raw); ok {
				if more, ok := o.findMoreHoles(raw); ok {
					o.hole, o.more = h, more
					o.u = nil
					return
				}
			}
		}
	}
	if o.variants != nil {
		for _, loc := range o.locations {
			if !o.viewChangedFor(loc) && (o.lastGood[loc] == nil || o.pending(loc)) {
				// Unchanged, or showing prev's rendering while its own is pending.
				if v := prev.viewToShare(loc); v != nil && v.rv == o.VisibleResourceVersion(loc) {
					o.shareVariant(loc, v)
					continue
				}
			}
			o.ForLocation(loc)
		}
	}
	if _, err := o.MarshalJSON(); err != nil {
		return
	}
	o.u = nil
}

// header returns an Object with o's identity, labels, locations and resourceVersions but no
// content (dropped): what the history keeps of a large version once superseded, enough to tell
// which watches an event concerns (event.needsDropped).
func (o *Object) header() *Object {
	return &Object{key: o.key, cluster: o.cluster, namespace: o.namespace, name: o.name, uid: o.uid,
		typeMeta: o.typeMeta, locations: o.locations, assigned: o.assigned, rv: o.rv, rvString: o.rvString,
		generation: o.generation, sourceRV: o.sourceRV, labels: o.labels, visible: o.visible, dropped: true}
}

// treeFactor estimates the memory of a decoded object (unstructured maps and slices) per byte
// of its JSON.
const treeFactor = 4

// jsonSize returns the length of o's JSON (0 for a header). Called for stored versions, whose
// JSON is made when they are stored (compact).
func (o *Object) jsonSize() int {
	if o.dropped {
		return 0
	}
	raw, _ := o.MarshalJSON()
	return len(raw)
}

// memSize estimates the bytes that o keeps alive and that die with it: its JSON, the JSON of
// the per-location views made for it, and the decoded trees it keeps (its content when kept,
// renderings, the last renderings shown), each counted as treeFactor times its JSON. Shared
// bytes (a view shared with the previous version) are counted too: the estimate errs on the
// high side.
func (o *Object) memSize() int64 {
	if o.dropped {
		return 0
	}
	j := int64(o.jsonSize())
	n := j
	trees := len(o.rendered) + len(o.lastGood)
	if o.u != nil {
		trees++
	}
	n += int64(trees) * treeFactor * j
	if o.variants != nil {
		o.variants.mu.Lock()
		for _, v := range o.variants.m {
			if v != o && v.base == nil {
				raw, _ := v.MarshalJSON()
				n += int64(len(raw))
			}
		}
		o.variants.mu.Unlock()
	}
	return n
}

// variantOf returns the view of location already made for o, nil if none (or o is nil).
func (o *Object) variantOf(location string) *Object {
	if o == nil || o.variants == nil {
		return nil
	}
	o.variants.mu.Lock()
	defer o.variants.mu.Unlock()
	return o.variants.m[location]
}

// viewToShare returns location's view of o when it is made already or costs no rendering: a
// template view (o's JSON with the assignment filled in, template.go), which a version whose
// assignment alone changed can share with o for the locations it keeps. It returns nil
// otherwise, and when o is nil or not assigned to location.
func (o *Object) viewToShare(location string) *Object {
	if v := o.variantOf(location); v != nil {
		return v
	}
	if o != nil && o.hole.end > 0 && o.HasLocation(location) {
		return o.ForLocation(location)
	}
	return nil
}

// shareVariant makes location's view of o a new Object sharing the bytes of v, the same view
// of the previous version; only its source resourceVersion is o's. A template view is shared
// as one (it refers to the previous version's JSON) instead of being copied. Called by compact.
func (o *Object) shareVariant(location string, v *Object) {
	var s *Object
	if v.base != nil {
		s = o.viewFromJSON(rawjson.Compact{}, v.rv, v.rvString, v.generation)
		s.base, s.fill, s.more = v.base, v.fill, v.more
	} else {
		if _, err := v.MarshalJSON(); err != nil {
			o.ForLocation(location)
			return
		}
		s = o.viewFromJSON(v.json, v.rv, v.rvString, v.generation)
	}
	s.labels = v.labels // what the view shows (a rendering may relabel it)
	o.variants.mu.Lock()
	defer o.variants.mu.Unlock()
	if o.variants.m == nil {
		o.variants.m = map[string]*Object{}
	}
	o.variants.m[location] = s
}

// Content returns the decoded object: the kept tree, else a new decoding of the object's JSON.
// Callers must not change it (it may be shared). The error, a *DecodeFailure, says that the
// object's JSON does not decode: impossible for the bytes the cache keeps (ingest stores only
// versions that decode as kube-apiserver's decoder reads them: source.DecodeObject, build), so
// a defect of the cache, which a reader reports (an HTTP 500 Status naming the object) instead
// of serving something else in its place.
func (o *Object) Content() (*unstructured.Unstructured, error) {
	if o.u != nil {
		return o.u, nil
	}
	raw, err := o.MarshalJSON()
	if err == nil {
		u := &unstructured.Unstructured{}
		if err = u.UnmarshalJSON(raw); err == nil {
			return u, nil
		}
	}
	klog.ErrorS(err, "Cannot decode a cached object", "object", contract.Truncate(string(o.key), maxLoggedValue), "resourceVersion", o.rvString)
	return nil, &DecodeFailure{TypeMeta: o.typeMeta, Key: o.key, ResourceVersion: o.rvString, Err: err}
}

// content is Content for the cache's own computations on a stored version (rendering,
// comparing versions), whose content decodes (see Content). On the impossible failure, logged
// by Content, it returns an object with the identity only, so that ingest goes on; readers
// never get it: they read Content, Unstructured, GetObject.
func (o *Object) content() *unstructured.Unstructured {
	u, err := o.Content()
	if err != nil {
		u = &unstructured.Unstructured{}
		u.SetAPIVersion(o.typeMeta.APIVersion)
		u.SetKind(o.typeMeta.Kind)
		u.SetNamespace(o.namespace)
		u.SetName(o.name)
		u.SetResourceVersion(o.rvString)
	}
	return u
}

// DecodeFailure is the error of an Object whose JSON does not decode (Object.Content), and the
// runtime.Object that the methods without an error (GetObject, DeepCopyObject) return in its
// place: the view's conversions (as=Table) report it as an internal error, and
// metadata-only conversions (as=PartialObjectMetadata) fail on it, instead of serving an
// empty object.
type DecodeFailure struct {
	metav1.TypeMeta
	// Key and ResourceVersion name the object version.
	Key             contract.Key
	ResourceVersion string
	// Err is the decoder's error.
	Err error
}

var _ runtime.Object = &DecodeFailure{}

// Error implements error.
func (f *DecodeFailure) Error() string {
	return fmt.Sprintf("the cached object %s at resourceVersion %s cannot be decoded: %v",
		contract.Truncate(string(f.Key), maxLoggedValue), contract.Truncate(f.ResourceVersion, maxLoggedValue), f.Err)
}

// Unwrap returns the decoder's error.
func (f *DecodeFailure) Unwrap() error { return f.Err }

// DeepCopyObject implements runtime.Object (a DecodeFailure is never changed).
func (f *DecodeFailure) DeepCopyObject() runtime.Object { return f }

// withResourceVersion returns a new Object with the content of o but metadata.resourceVersion
// set to rv. kube-apiserver's cacher sends such a copy of the previous object state in the
// DELETED event of a watcher whose selector the object stopped matching. The copy keeps its
// decoded tree: it serves one event.
func (o *Object) withResourceVersion(rv uint64) *Object {
	u := o.content().DeepCopy() // only for deleting a stored version (see content)
	u.SetResourceVersion(strconv.FormatUint(rv, 10))
	c := newObject(o.key, o.cluster, o.namespace, o.name, o.assigned, rv, u)
	c.locations, c.rendered, c.lastGood, c.failed = o.locations, o.rendered, o.lastGood, o.failed
	c.ensureVariants()
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

// UID returns the object's metadata.uid.
func (o *Object) UID() types.UID { return o.uid }

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
func (o *Object) SourceObject() (*unstructured.Unstructured, error) {
	u, err := o.Content()
	if err != nil {
		return nil, err
	}
	if u == o.u {
		u = u.DeepCopy()
	}
	if o.edit != nil {
		o.edit.undo(u)
	}
	return u, nil
}

// Unstructured returns the object's content, decoded from its JSON unless the object keeps
// its tree; nil when it does not decode (Content returns why). It may be shared by all
// readers: READ-ONLY. It costs a decoding per call on most objects: the LIST and watch paths
// use MarshalJSON and CacheEncode instead.
func (o *Object) Unstructured() *unstructured.Unstructured {
	u, _ := o.Content()
	return u
}

// Labels returns the object's labels for label-selector matching (labels.Labels; no map is
// built).
func (o *Object) Labels() labels.Labels { return o.labels }

// Fields returns the object's selectable fields, "metadata.name" and "metadata.namespace"
// (the field selectors a location view supports, docs/design.md), without building a map.
func (o *Object) Fields() fields.Fields { return objectFields{o} }

// objectFields is the fields.Fields of an Object.
type objectFields struct{ o *Object }

// Has reports whether field is metadata.name or metadata.namespace.
func (f objectFields) Has(field string) bool {
	return field == "metadata.name" || field == "metadata.namespace"
}

// Get returns the value of metadata.name or metadata.namespace, "" for any other field.
func (f objectFields) Get(field string) string {
	switch field {
	case "metadata.name":
		return f.o.name
	case "metadata.namespace":
		return f.o.namespace
	}
	return ""
}

// GetObjectKind implements runtime.Object. It returns a copy of the object's apiVersion and
// kind: setting it changes nothing (the Object is immutable).
func (o *Object) GetObjectKind() schema.ObjectKind {
	tm := o.typeMeta
	return &tm
}

// DeepCopyObject implements runtime.Object: it returns the object decoded as
// *unstructured.Unstructured, which the caller owns, or the *DecodeFailure when it does not
// decode (Content).
func (o *Object) DeepCopyObject() runtime.Object {
	if o.u != nil {
		return o.u.DeepCopy()
	}
	u, err := o.Content()
	if err != nil {
		return err.(*DecodeFailure)
	}
	return u
}

// GetObjectMeta implements metav1.ObjectMetaAccessor (so meta.Accessor works on an *Object).
// It returns the decoded object: READ-ONLY; nil when it does not decode (meta.Accessor then
// returns an error).
func (o *Object) GetObjectMeta() metav1.Object {
	if u, err := o.Content(); err == nil {
		return u
	}
	return nil
}

// GetObject implements runtime.CacheableObject: the decoded object (READ-ONLY), which the
// apiserver hands to conversions (as=Table) that it does not cache, or the *DecodeFailure when
// it does not decode (Content): the conversion fails with it.
func (o *Object) GetObject() runtime.Object {
	u, err := o.Content()
	if err != nil {
		return err.(*DecodeFailure)
	}
	return u
}

// CacheEncode implements runtime.CacheableObject: the first call for an identifier runs encode
// on the object's JSON (jsonObject) and caches the result (bytes or error); every call writes
// the cached bytes to w (encodeCache).
func (o *Object) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	return o.encodings.encode(id, encode, func() runtime.Object {
		objectEncodings.Inc()
		return o.encodable()
	}, w)
}

// encodable returns what encoders get: the object's JSON as a jsonObject, or the decoded tree
// when the JSON could not be encoded (the encoder then reports the error).
func (o *Object) encodable() runtime.Object {
	if o.base != nil {
		return &jsonObject{o: o, TypeMeta: o.typeMeta}
	}
	if _, err := o.MarshalJSON(); err != nil {
		return o.content()
	}
	return &jsonObject{o: o, TypeMeta: o.typeMeta}
}

// MarshalJSON implements json.Marshaler: the object's JSON, encoded on first use and cached.
// The returned slice is shared: do not change it. A view made from its object's JSON
// (templateView) returns a new copy on each call: readers that can write pieces use WriteJSON.
func (o *Object) MarshalJSON() ([]byte, error) {
	if o.base != nil {
		raw := make([]byte, 0, o.templateSize())
		_ = o.templatePieces(func(p []byte) error {
			raw = append(raw, p...)
			return nil
		})
		return raw, nil
	}
	o.jsonOnce.Do(func() {
		// The bytes unstructured's encoder writes (encoding/json of the content) without the
		// newline json.Encoder ends them with: they are written as a list item, an object or
		// a watch event's object as they are (pkg/registry/view).
		o.json, o.jsonErr = rawjson.Marshal(o.u.Object)
	})
	return o.json.Bytes(), o.jsonErr
}

// WriteJSON writes the object's JSON (what MarshalJSON returns) to w without copying it: a view
// made from its object's JSON is written in three pieces. It returns MarshalJSON's or w's error.
func (o *Object) WriteJSON(w io.Writer) error {
	if o.base != nil {
		return o.templatePieces(func(p []byte) error {
			_, err := w.Write(p)
			return err
		})
	}
	raw, err := o.MarshalJSON()
	if err != nil {
		return err
	}
	_, err = w.Write(raw)
	return err
}
