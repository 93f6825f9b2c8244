package view

import (
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// metaScheme knows the meta types a view writes besides the objects themselves: Status,
// Table, PartialObjectMetadata(List), WatchEvent and the discovery documents.
var metaScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	metav1.AddMetaToScheme(s)
	return s
}()

// serializer is the runtime.NegotiatedSerializer of every view resource: JSON (also pretty, and
// streamed for watches) and YAML.
//
// Objects of the view carry their own apiVersion and kind (they are the source's objects), so
// they are written as they are; cache.Object's CacheableObject implementation means each object
// version is encoded once per encoder. Lists are encoded item by item
// (StreamingCollectionsEncoding), each item from its cached bytes. Meta types get their
// apiVersion and kind from metaScheme. Protobuf is not offered: the source's objects are held
// as unstructured JSON, as kube-apiserver does for custom resources.
type serializer struct {
	infos []runtime.SerializerInfo
	// json is the compact JSON serializer, the one whose lists writeList writes.
	json runtime.Serializer
}

func newSerializer() *serializer {
	jsonS := json.NewSerializerWithOptions(json.DefaultMetaFactory, unstructuredCreater{}, unstructuredTyper{}, json.SerializerOptions{StreamingCollectionsEncoding: true})
	pretty := json.NewSerializerWithOptions(json.DefaultMetaFactory, unstructuredCreater{}, unstructuredTyper{}, json.SerializerOptions{Pretty: true})
	yamlS := json.NewSerializerWithOptions(json.DefaultMetaFactory, unstructuredCreater{}, unstructuredTyper{}, json.SerializerOptions{Yaml: true})
	// Strict decoders serve field validation (Warn and Strict) of status writes.
	strictJSON := json.NewSerializerWithOptions(json.DefaultMetaFactory, unstructuredCreater{}, unstructuredTyper{}, json.SerializerOptions{Strict: true})
	strictYAML := json.NewSerializerWithOptions(json.DefaultMetaFactory, unstructuredCreater{}, unstructuredTyper{}, json.SerializerOptions{Yaml: true, Strict: true})
	return &serializer{json: jsonS, infos: []runtime.SerializerInfo{
		{
			MediaType: "application/json", MediaTypeType: "application", MediaTypeSubType: "json",
			EncodesAsText: true, Serializer: jsonS, PrettySerializer: pretty, StrictSerializer: strictJSON,
			StreamSerializer: &runtime.StreamSerializerInfo{EncodesAsText: true, Serializer: jsonS, Framer: json.Framer},
		},
		{
			MediaType: "application/yaml", MediaTypeType: "application", MediaTypeSubType: "yaml",
			EncodesAsText: true, Serializer: yamlS, StrictSerializer: strictYAML,
		},
	}}
}

// SupportedMediaTypes returns JSON and YAML (also application/apply-patch+yaml bodies, which
// PatchResource decodes itself).
func (s *serializer) SupportedMediaTypes() []runtime.SerializerInfo { return s.infos }

// EncoderForVersion wraps enc so that meta types get their apiVersion and kind; the view's own
// objects are written unchanged (they are already of the version the view serves).
func (s *serializer) EncoderForVersion(enc runtime.Encoder, _ runtime.GroupVersioner) runtime.Encoder {
	return &typingEncoder{Encoder: enc, raw: enc == s.json}
}

// DecoderToVersion returns a decoder that reads objects as unstructured.
func (s *serializer) DecoderToVersion(dec runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return dec
}

// typingEncoder sets the apiVersion and kind of meta types (Status, Table, ...) that are built
// per request without them, then delegates to the wrapped encoder.
type typingEncoder struct {
	runtime.Encoder
	// raw says the wrapped encoder is the compact JSON one, so view Lists, objects and
	// watch events are written from the cached bytes (raw_encoding.go).
	raw bool
}

// Encode writes obj, typing it from metaScheme if it carries no kind. The compact JSON encoder
// writes lists, objects holding their JSON and watch events of encoded objects from their
// bytes (raw_encoding.go).
func (e *typingEncoder) Encode(obj runtime.Object, w io.Writer) error {
	if e.raw {
		switch t := obj.(type) {
		case *List:
			return writeList(t, w)
		case jsonWriter:
			return writeObject(t, w)
		case *metav1.WatchEvent:
			if done, err := writeWatchEvent(t, w); done {
				return err
			}
		}
	}
	switch obj.(type) {
	case runtime.CacheableObject, *unstructured.Unstructured, *List, *metav1.WatchEvent:
		return e.Encoder.Encode(obj, w)
	}
	if obj.GetObjectKind().GroupVersionKind().Kind == "" {
		if gvks, _, err := metaScheme.ObjectKinds(obj); err == nil && len(gvks) > 0 {
			obj.GetObjectKind().SetGroupVersionKind(preferredKind(gvks))
		}
	}
	return e.Encoder.Encode(obj, w)
}

// Identifier distinguishes this encoder's output in the per-object encoding caches.
func (e *typingEncoder) Identifier() runtime.Identifier {
	return runtime.Identifier("view-" + string(e.Encoder.Identifier()))
}

// preferredKind picks meta.k8s.io/v1 for Table and PartialObjectMetadata, the legacy v1 for the
// rest (Status, discovery documents), as kube-apiserver writes them.
func preferredKind(gvks []schema.GroupVersionKind) schema.GroupVersionKind {
	for _, gvk := range gvks {
		if gvk.Group == metav1.GroupName {
			return gvk
		}
	}
	return gvks[0]
}

// unstructuredCreater creates unstructured objects for any kind: the view serves the source's
// resources, which this process has no Go types for.
type unstructuredCreater struct{}

// New returns an empty unstructured object of kind gvk.
func (unstructuredCreater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// unstructuredTyper reads the kind of an object from the object itself.
type unstructuredTyper struct{}

// ObjectKinds returns the object's own GroupVersionKind, or the meta scheme's.
func (unstructuredTyper) ObjectKinds(obj runtime.Object) ([]schema.GroupVersionKind, bool, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" {
		return []schema.GroupVersionKind{gvk}, false, nil
	}
	return metaScheme.ObjectKinds(obj)
}

// Recognizes reports whether the kind is one the view can write.
func (unstructuredTyper) Recognizes(gvk schema.GroupVersionKind) bool { return true }
