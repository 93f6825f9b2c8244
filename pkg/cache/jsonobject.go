package cache

import (
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cluster-mapper/cluster-mapper/pkg/rawjson"
)

// jsonObject is an Object as its encoders see it (Object.CacheEncode): the object's JSON
// bytes with its apiVersion and kind.
//
// The JSON, pretty JSON and YAML encoders of k8s.io/apimachinery's json serializer write an
// object through encoding/json, which calls MarshalJSON: so encoding an Object copies its
// bytes and never walks a decoded tree (no decoding on the LIST or watch path). The
// conversions of the apiserver's watch handler that need the content (as=Table,
// as=PartialObjectMetadata) reach it through runtime.Unstructured or
// metav1.ObjectMetaAccessor, which decode the bytes once per jsonObject. A jsonObject is made
// per encoding: content set through SetUnstructuredContent is what it then encodes.
type jsonObject struct {
	metav1.TypeMeta
	o *Object
	// u is the decoded content, once something asked for it.
	u *unstructured.Unstructured
	// err is why the content does not decode (Object.Content), once something asked for it.
	err error
}

var (
	_ runtime.Unstructured      = &jsonObject{}
	_ metav1.ObjectMetaAccessor = &jsonObject{}
)

// Content returns the content, decoding it on first use (Object.Content, whose error it
// returns).
func (j *jsonObject) Content() (*unstructured.Unstructured, error) {
	if j.u == nil && j.err == nil {
		j.u, j.err = j.o.Content()
		if j.u != nil && j.u == j.o.u {
			j.u = j.u.DeepCopy() // the content of a jsonObject may be changed
		}
	}
	return j.u, j.err
}

// MarshalJSON returns the Object's cached JSON (shared: do not change it), or the encoding of
// the content once it was decoded (it may have been changed).
func (j *jsonObject) MarshalJSON() ([]byte, error) {
	if j.u != nil {
		return j.u.MarshalJSON()
	}
	return j.o.MarshalJSON()
}

// WriteJSON writes what MarshalJSON returns without copying the Object's bytes (Object.WriteJSON):
// the view's JSON encoder writes it so, as it writes list items.
func (j *jsonObject) WriteJSON(w io.Writer) error {
	if j.u != nil {
		// Valid and compact, without json.Encoder's newline, as an Object's own JSON
		// (Object.MarshalJSON).
		raw, err := rawjson.Marshal(j.u.Object)
		if err != nil {
			return err
		}
		_, err = w.Write(raw.Bytes())
		return err
	}
	return j.o.WriteJSON(w)
}

// DeepCopyObject returns the content as an *unstructured.Unstructured the caller owns, or the
// *DecodeFailure when it does not decode.
func (j *jsonObject) DeepCopyObject() runtime.Object {
	u, err := j.Content()
	if err != nil {
		return err.(*DecodeFailure)
	}
	return u.DeepCopy()
}

// GetObjectMeta returns the decoded content's metadata accessor; nil when it does not decode
// (meta.Accessor then returns an error).
func (j *jsonObject) GetObjectMeta() metav1.Object {
	if u, err := j.Content(); err == nil {
		return u
	}
	return nil
}

// NewEmptyInstance returns an empty unstructured object (runtime.Unstructured).
func (j *jsonObject) NewEmptyInstance() runtime.Unstructured { return &unstructured.Unstructured{} }

// UnstructuredContent returns the decoded content (runtime.Unstructured); nil when it does
// not decode (Content returns why).
func (j *jsonObject) UnstructuredContent() map[string]interface{} {
	if u, err := j.Content(); err == nil {
		return u.Object
	}
	return nil
}

// SetUnstructuredContent replaces the content (runtime.Unstructured).
func (j *jsonObject) SetUnstructuredContent(content map[string]interface{}) {
	j.u, j.err = &unstructured.Unstructured{Object: content}, nil
}

// IsList returns false: an Object is never a list.
func (j *jsonObject) IsList() bool { return false }

// EachListItem returns an error: an Object is never a list.
func (j *jsonObject) EachListItem(func(runtime.Object) error) error {
	return fmt.Errorf("%s is not a list", j.Kind)
}

// EachListItemWithAlloc returns an error: an Object is never a list.
func (j *jsonObject) EachListItemWithAlloc(func(runtime.Object) error) error {
	return fmt.Errorf("%s is not a list", j.Kind)
}
