package cache

import (
	"io"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// bookmark is the object of a BOOKMARK event: the resource's apiVersion and kind and
// metadata.resourceVersion only, with the annotation "k8s.io/initial-events-end": "true" for
// the bookmark that ends a watch's initial events (KEP-3157). It is never changed after it is
// made, so one bookmark serves every watcher that gets a periodic BOOKMARK at its
// resourceVersion (ResourceStore.sendBookmarks), and, as a runtime.CacheableObject, is encoded
// once per encoder however many watchers it reaches, as an Object is. Before, every watcher's
// periodic BOOKMARK was an unstructured object of its own, built and encoded per watcher:
// about 6% of mapper-apiserver's CPU with 10,000 watches (bench scenario 2).
//
// It implements runtime.Object (GetObjectKind returns a copy of the apiVersion and kind),
// runtime.CacheableObject, and metav1.ObjectMetaAccessor (READ-ONLY), which the apiserver's
// watch handler reads the annotation through.
type bookmark struct {
	rv uint64
	// u is the object; never changed.
	u         *unstructured.Unstructured
	encodings encodeCache
}

var (
	_ runtime.CacheableObject   = &bookmark{}
	_ metav1.ObjectMetaAccessor = &bookmark{}
)

// newBookmark returns the BOOKMARK object of a resource of kind gvk at resourceVersion rv,
// marked as the end of the initial events when initialEventsEnd is set.
func newBookmark(gvk schema.GroupVersionKind, rv uint64, initialEventsEnd bool) *bookmark {
	u := &unstructured.Unstructured{Object: map[string]interface{}{}}
	u.SetGroupVersionKind(gvk)
	u.SetResourceVersion(strconv.FormatUint(rv, 10))
	if initialEventsEnd {
		u.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	}
	return &bookmark{rv: rv, u: u}
}

// GetObjectKind returns a copy of the bookmark's apiVersion and kind (setting it changes
// nothing: the bookmark is shared).
func (b *bookmark) GetObjectKind() schema.ObjectKind {
	tm := metav1.TypeMeta{APIVersion: b.u.GetAPIVersion(), Kind: b.u.GetKind()}
	return &tm
}

// DeepCopyObject returns the bookmark as an *unstructured.Unstructured the caller owns.
func (b *bookmark) DeepCopyObject() runtime.Object { return b.u.DeepCopy() }

// GetObject implements runtime.CacheableObject: a copy the caller owns.
func (b *bookmark) GetObject() runtime.Object { return b.u.DeepCopy() }

// GetObjectMeta implements metav1.ObjectMetaAccessor: the bookmark's metadata, READ-ONLY.
func (b *bookmark) GetObjectMeta() metav1.Object { return b.u }

// CacheEncode implements runtime.CacheableObject: the first call for an identifier runs encode
// on a copy of the bookmark and caches the result; every call writes the cached bytes to w
// (encodeCache).
func (b *bookmark) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	return b.encodings.encode(id, encode, b.GetObject, w)
}
