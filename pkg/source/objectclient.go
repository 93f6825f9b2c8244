package source

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	kjson "sigs.k8s.io/json"

	"github.com/cluster-mapper/cluster-mapper/pkg/rawjson"
)

// The object client lists and watches the source like client-go's dynamic client does (the
// same paths and parameters), but its decoder reads each object into an Object (its bytes and
// metadata) instead of a tree of maps: the cache keeps the bytes, so the tree would be garbage
// right away ("decoding the source's watch stream is 19% of ingest").

// versionV1 is the version of the meta types (list options, Status, WatchEvent).
var versionV1 = schema.GroupVersion{Version: "v1"}

// metaScheme knows the meta types a list or watch response carries around the objects:
// WatchEvent frames, Status errors, and the list options sent as parameters.
var metaScheme = runtime.NewScheme()

// parameterCodec encodes metav1.ListOptions as query parameters, as the dynamic client does.
var parameterCodec = runtime.NewParameterCodec(metaScheme)

func init() {
	metav1.AddToGroupVersion(metaScheme, versionV1)
}

// NewObjectClient returns the REST client of Config.Objects for the source at cfg, sharing
// httpClient (connections, TLS) with the source's other clients; httpClient nil builds one from
// cfg. It reads JSON only. add, when its Key is set, is added to every object read that lacks it
// (a plain source's kcp.io/cluster: the cache then stores the source's bytes as they come).
// Errors are those of building the client from cfg.
func NewObjectClient(cfg *rest.Config, httpClient *http.Client, add Annotation) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.ContentConfig = rest.ContentConfig{
		AcceptContentTypes:   "application/json",
		ContentType:          "application/json",
		NegotiatedSerializer: objectSerializer{add: add},
	}
	c.GroupVersion = &versionV1
	c.APIPath = ""
	if httpClient == nil {
		var err error
		if httpClient, err = rest.HTTPClientFor(c); err != nil {
			return nil, err
		}
	}
	return rest.UnversionedRESTClientForConfigAndClient(c, httpClient)
}

// resourcePath is the path of gvr across all namespaces (/api/v1/<resource> for the core group,
// /apis/<group>/<version>/<resource> otherwise).
func resourcePath(gvr schema.GroupVersionResource) []string {
	if gvr.Group == "" {
		return []string{"/api", gvr.Version, gvr.Resource}
	}
	return []string{"/apis", gvr.Group, gvr.Version, gvr.Resource}
}

// objectSerializer is the object client's runtime.NegotiatedSerializer: JSON, with objects
// decoded by objectCodec and watch frames (framed by rawjson.Framer) by watchEventCodec.
type objectSerializer struct {
	// add is the annotation added to every object that lacks it.
	add Annotation
}

// SupportedMediaTypes implements runtime.NegotiatedSerializer.
func (s objectSerializer) SupportedMediaTypes() []runtime.SerializerInfo {
	return []runtime.SerializerInfo{{
		MediaType:        "application/json",
		MediaTypeType:    "application",
		MediaTypeSubType: "json",
		EncodesAsText:    true,
		Serializer:       objectCodec{add: s.add},
		StreamSerializer: &runtime.StreamSerializerInfo{
			EncodesAsText: true,
			Serializer:    watchEventCodec{},
			Framer:        rawjson.Framer,
		},
	}}
}

// EncoderForVersion implements runtime.NegotiatedSerializer: the client sends no objects.
func (objectSerializer) EncoderForVersion(e runtime.Encoder, _ runtime.GroupVersioner) runtime.Encoder {
	return e
}

// DecoderToVersion implements runtime.NegotiatedSerializer: objects are kept as sent.
func (objectSerializer) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return d
}

// objectCodec decodes a response body or a watch event's object: into a *List, an *Object or a
// *metav1.Status; with no target (a watch event's object), a Status (kind Status of v1) or else
// an Object, which carries the error when the object does not decode (Object.DecodeError).
type objectCodec struct {
	// add is the annotation added to every object that lacks it.
	add Annotation
}

// errReadOnly is objectCodec's answer to Encode.
var errReadOnly = errors.New("the source's object client only reads")

// Decode implements runtime.Decoder.
func (c objectCodec) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	switch t := into.(type) {
	case *List:
		if err := decodeList(data, t, c.add); err != nil {
			return nil, nil, err
		}
		gvk := t.GroupVersionKind()
		return t, &gvk, nil
	case *metav1.Status:
		if err := kjson.UnmarshalCaseSensitivePreserveInts(data, t); err != nil {
			return nil, nil, err
		}
		return t, &schema.GroupVersionKind{Version: "v1", Kind: "Status"}, nil
	case *Object:
		o, err := DecodeObject(data, c.add)
		if err != nil {
			return nil, nil, err
		}
		*t = *o
		gvk := o.GroupVersionKind()
		return t, &gvk, nil
	case nil:
		// A watch event's object (client-go's watch decoder): one that does not decode is an
		// Object carrying the error (Object.DecodeError), which the cache skips and counts; an
		// error here would end the watch, and the reflector would resume at the same event.
		o := DecodeItem(data, c.add)
		if o.decodeErr == nil && o.APIVersion == "v1" && o.Kind == "Status" {
			return c.Decode(data, nil, &metav1.Status{})
		}
		gvk := o.GroupVersionKind()
		return o, &gvk, nil
	default:
		return nil, nil, fmt.Errorf("the source's object client cannot decode into %T", into)
	}
}

// Encode implements runtime.Encoder; the object client sends no bodies.
func (objectCodec) Encode(runtime.Object, io.Writer) error { return errReadOnly }

// Identifier implements runtime.Encoder.
func (objectCodec) Identifier() runtime.Identifier { return "cluster-mapper-source-object-json" }

// watchEventCodec decodes one frame of a watch of the object client, {"type": ..., "object":
// {...}}, into a *metav1.WatchEvent with the JSON walker. apimachinery's JSON serializer would
// read each frame twice more before the object is read at all (once for its kind, once into
// the event), about an eighth of mapper-apiserver's CPU while it fans out source events
// (bench scenario 2's profile). The event's object refers to the frame, in the framer's buffer,
// which the next frame reuses: client-go's watch decoder (k8s.io/client-go/rest/watch.Decoder)
// decodes it with objectCodec, which copies what it keeps, before it reads the next frame. Not
// copying it here saves a short-lived copy of every object, which would be interleaved with
// the copies the cache keeps.
type watchEventCodec struct{}

// Decode implements runtime.Decoder: into must be a *metav1.WatchEvent.
func (watchEventCodec) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	ev, ok := into.(*metav1.WatchEvent)
	if !ok {
		return nil, nil, fmt.Errorf("the source's object client cannot decode a watch event into %T", into)
	}
	*ev = metav1.WatchEvent{}
	_, end, err := rawjson.WalkObject(data, 0, func(m rawjson.Member) error {
		switch string(rawjson.MemberName(m.Key)) {
		case "type":
			return decodeString(data[m.ValueStart:m.End], &ev.Type, "type")
		case "object":
			ev.Object.Raw = data[m.ValueStart:m.End]
		}
		return nil
	})
	if err == nil {
		if i := rawjson.SkipSpace(data, end); i != len(data) {
			err = fmt.Errorf("unexpected data after the event at offset %d", i)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cannot decode a watch event of the source: %w", err)
	}
	return ev, &schema.GroupVersionKind{Version: "v1", Kind: "WatchEvent"}, nil
}

// Encode implements runtime.Encoder; the object client sends no watch events.
func (watchEventCodec) Encode(runtime.Object, io.Writer) error { return errReadOnly }

// Identifier implements runtime.Encoder.
func (watchEventCodec) Identifier() runtime.Identifier {
	return "cluster-mapper-source-watch-event-json"
}
