package source

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kjson "sigs.k8s.io/json"

	"github.com/cluster-mapper/cluster-mapper/pkg/rawjson"
)

// Annotation is an annotation the object client adds to every object that lacks it
// (NewObjectClient): a plain source's kcp.io/cluster (docs/design.md, "Names").
type Annotation struct {
	// Key is the annotation's key; "" adds nothing.
	Key string
	// Value is its value.
	Value string
}

// Object is one object of the source as the source sent it: its JSON bytes, without
// metadata.managedFields (views never show them, docs/design.md, "The location view"), and the
// metadata the cache indexes, read from those bytes without decoding the rest (a
// cached object is bytes). List and Watch hand the cache Objects when the Source has an
// object client (Config.Objects).
//
// ObjectMeta holds name, namespace, uid, resourceVersion, generation, labels, annotations,
// finalizers and deletionTimestamp only, so that client-go's reflector (meta.Accessor) and the
// cache can read them. An Object is
// never changed after decoding.
//
// Its JSON is made in one allocation of the exact size while decoding, with the annotation the
// client adds (Annotation) already in it, and the cache keeps that very slice. So every object
// costs one allocation that lives, and the garbage of a first list is one large block (its
// body) or one reused buffer (a streaming list's frames): no short-lived copy of each object
// is interleaved with the kept ones, which fragmented the heap and kept the start-up peak
// resident.
type Object struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	// raw is the object's JSON without metadata.managedFields, with the added annotation.
	raw rawjson.Compact
	// added says the decoder added the annotation addedKey (Annotations has it too), and
	// hadAnnotations whether the object had a metadata.annotations object before.
	added          bool
	addedKey       string
	hadAnnotations bool
	// decodeErr, when set, says why the object's JSON does not decode (DecodeError): raw is
	// nil, and the metadata holds what could be read of it.
	decodeErr error
}

var (
	_ runtime.Object            = &Object{}
	_ metav1.ObjectMetaAccessor = &Object{}
	_ json.Unmarshaler          = &Object{}
)

// JSON returns the object's JSON as the source sent it (normalized: DecodeObject), without
// metadata.managedFields and with the annotation the client added. Its bytes are shared: do not
// change them. It is the zero Compact for an Object that does not decode (DecodeError).
func (o *Object) JSON() rawjson.Compact { return o.raw }

// Added returns the key of the annotation the object client added to this object
// (Annotation), and whether the object had a metadata.annotations object before; ok is false
// when nothing was added.
func (o *Object) Added() (key string, hadAnnotations, ok bool) {
	return o.addedKey, o.hadAnnotations, o.added
}

// DecodeError returns why the object's JSON does not decode, for an item of a list or the
// object of a watch event that DecodeObject refused (nil for every other Object). Such an
// Object has no JSON; its ObjectMeta holds what could be read of its metadata (name,
// namespace, uid, resourceVersion, annotations), so that the cache can count it, log it once
// per object version and keep serving the version it has (docs/views.md, "Objects that do not
// decode"). The object client hands it over instead of failing the whole list or watch: the
// reflector would retry the same list or event forever, and the resource would never sync.
func (o *Object) DecodeError() error { return o.decodeErr }

// DeepCopyObject implements runtime.Object. The copy shares the (immutable) JSON bytes.
func (o *Object) DeepCopyObject() runtime.Object {
	c := *o
	o.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

// UnmarshalJSON implements json.Unmarshaler (DecodeObject).
func (o *Object) UnmarshalJSON(data []byte) error {
	d, err := DecodeObject(data, Annotation{})
	if err != nil {
		return err
	}
	*o = *d
	return nil
}

// DecodeObject reads an Object from data, one JSON object: apiVersion, kind and the metadata
// fields Object keeps. Only the metadata is decoded; spec, status and every other field are kept
// as the source wrote them, in a new slice (data is not kept), without metadata.managedFields
// and with add (when its Key is set) added to an object that lacks it and has metadata.
//
// data is validated and normalized first (rawjson.Normalize) and read as kube-apiserver's decoder reads it
// (sigs.k8s.io/json, non-strict, which client-go also uses on the responses of the view), so
// that what the cache indexes (names, labels, annotations) is what a client of the view
// decodes from the kept bytes:
//   - text with a string of invalid UTF-8 or an object with a member name twice is normalized:
//     the kept bytes are the decoder's reading encoded again (encoding/json, as kube-apiserver
//     writes objects), where invalid UTF-8 is U+FFFD and the last of duplicate members counts;
//   - text with whitespace between tokens is compacted (the kept bytes are rawjson.Compact);
//   - a number outside the range of a float64 is an error (the decoder refuses the object).
//
// Errors name what is malformed (text that is not a JSON object, a number out of range, a
// metadata field of the wrong type).
func DecodeObject(data []byte, add Annotation) (*Object, error) {
	c, _, err := rawjson.Normalize(data)
	if err != nil {
		return nil, fmt.Errorf("cannot decode an object of the source: %w", err)
	}
	return decodeChecked(c, add)
}

// DecodeItem returns the Object of data, an item of a list or the object of a watch event, as
// the object client reads them: DecodeObject's, or when DecodeObject refuses data an Object
// that carries the error (DecodeError) and what can be read of its metadata (name, namespace,
// uid, resourceVersion, annotations, apiVersion, kind), so that the cache can skip that
// version alone. It never returns nil.
func DecodeItem(data []byte, add Annotation) *Object {
	o, err := DecodeObject(data, add)
	if err == nil {
		return o
	}
	o = &Object{decodeErr: err}
	str := func(field string) string {
		start, end, found, err := rawjson.ValueRange(data, "metadata", field)
		if err != nil || !found {
			return ""
		}
		s, _ := rawjson.Unquote(data[start:end])
		return s
	}
	o.Name, o.Namespace, o.UID, o.ResourceVersion = str("name"), str("namespace"), types.UID(str("uid")), str("resourceVersion")
	if start, end, found, err := rawjson.ValueRange(data, "metadata", "annotations"); err == nil && found {
		o.Annotations, _ = rawjson.StringMap(data[start:end])
	}
	for field, dst := range map[string]*string{"apiVersion": &o.APIVersion, "kind": &o.Kind} {
		if start, end, found, err := rawjson.ValueRange(data, field); err == nil && found {
			*dst, _ = rawjson.Unquote(data[start:end])
		}
	}
	return o
}

// decodeChecked is DecodeObject on text that rawjson.Normalize returned.
func decodeChecked(c rawjson.Compact, add Annotation) (*Object, error) {
	data := c.Bytes()
	o := &Object{}
	var meta metaLayout
	cutStart, cutEnd := -1, -1
	_, _, err := rawjson.WalkObject(data, 0, func(m rawjson.Member) error {
		v := data[m.ValueStart:m.End]
		switch string(rawjson.MemberName(m.Key)) {
		case "apiVersion":
			return decodeString(v, &o.APIVersion, "apiVersion")
		case "kind":
			return decodeString(v, &o.Kind, "kind")
		case "metadata":
			if string(v) == "null" {
				return nil
			}
			var err error
			meta, err = o.decodeMetadata(data, m.ValueStart)
			cutStart, cutEnd = meta.cutStart, meta.cutEnd
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot decode an object of the source: %w", err)
	}
	at, replace := -1, 0
	var insert []byte
	if _, has := o.Annotations[add.Key]; add.Key != "" && !has && meta.present {
		at, replace, insert = meta.insertion(add.Key, add.Value)
		o.added, o.addedKey, o.hadAnnotations = true, add.Key, o.Annotations != nil
		if o.Annotations == nil {
			o.Annotations = map[string]string{}
		}
		o.Annotations[add.Key] = add.Value
	}
	o.raw = rawjson.Splice(c, cutStart, cutEnd, at, replace, insert)
	return o, nil
}

// metaLayout is where the parts of an object's metadata are in its JSON.
type metaLayout struct {
	// present says the object has a metadata object; open is the index of its opening brace
	// and empty says it has no member but managedFields.
	present bool
	open    int
	empty   bool
	// annOpen is the index of metadata.annotations' value (-1 when there is no annotations
	// member): an opening brace, or with annNull the literal null; annEmpty says the
	// annotations object has no member.
	annOpen           int
	annNull, annEmpty bool
	// cutStart and cutEnd delimit the managedFields member with one separating comma
	// (cutStart < 0: none).
	cutStart, cutEnd int
}

// insertion returns what adding the annotation key: value writes into the object's JSON:
// insert replaces the replace bytes at index at (a null annotations value, or nothing).
func (l metaLayout) insertion(key, value string) (at, replace int, insert []byte) {
	k, _ := json.Marshal(key)
	v, _ := json.Marshal(value)
	switch {
	case l.annNull:
		return l.annOpen, len("null"), append(append(append(append([]byte{'{'}, k...), ':'), v...), '}')
	case l.annOpen >= 0:
		insert = append(append(append(insert, k...), ':'), v...)
		if !l.annEmpty {
			insert = append(insert, ',')
		}
		return l.annOpen + 1, 0, insert
	default:
		insert = append(append(append(append([]byte(`"annotations":{`), k...), ':'), v...), '}')
		if !l.empty {
			insert = append(insert, ',')
		}
		return l.open + 1, 0, insert
	}
}

// WithAnnotation returns a new copy of the object's JSON with metadata.annotations[key] set to
// value. The object must not have the annotation already (the caller checks Annotations); an
// error is returned when it does, or when the object has no metadata object.
func (o *Object) WithAnnotation(key, value string) (rawjson.Compact, error) {
	if _, ok := o.Annotations[key]; ok {
		return rawjson.Compact{}, fmt.Errorf("the object has the annotation %q already", key)
	}
	if o.decodeErr != nil {
		return rawjson.Compact{}, o.decodeErr
	}
	d, err := decodeChecked(o.raw, Annotation{Key: key, Value: value})
	if err != nil {
		return rawjson.Compact{}, err
	}
	if !d.added {
		return rawjson.Compact{}, fmt.Errorf("the object has no metadata")
	}
	return d.raw, nil
}

// decodeMetadata reads the metadata object that starts at data[i] into o and returns its
// layout (metaLayout).
func (o *Object) decodeMetadata(data []byte, i int) (metaLayout, error) {
	l := metaLayout{present: true, annOpen: -1, cutStart: -1, cutEnd: -1}
	// The cut of managedFields needs only its member and its neighbours: the member before it
	// and the one after it. They are kept as they pass, not in a slice of every member, which
	// would be garbage of every object decoded (and, as it grows, of several sizes).
	var managed, before, after, prev rawjson.Member
	var members int
	hasManaged, hasBefore, hasAfter := false, false, false
	open, _, err := rawjson.WalkObject(data, i, func(m rawjson.Member) error {
		v := data[m.ValueStart:m.End]
		if hasManaged && !hasAfter {
			after, hasAfter = m, true
		}
		previous := prev
		prev, members = m, members+1
		switch string(rawjson.MemberName(m.Key)) {
		case "name":
			return decodeString(v, &o.Name, "metadata.name")
		case "namespace":
			return decodeString(v, &o.Namespace, "metadata.namespace")
		case "uid":
			var uid string
			err := decodeString(v, &uid, "metadata.uid")
			o.UID = types.UID(uid)
			return err
		case "resourceVersion":
			return decodeString(v, &o.ResourceVersion, "metadata.resourceVersion")
		case "generation":
			if string(v) == "null" {
				return nil
			}
			g, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return fmt.Errorf("metadata.generation is not an integer: %w", err)
			}
			o.Generation = g
		case "labels":
			l, err := rawjson.StringMap(v)
			if err != nil {
				return fmt.Errorf("metadata.labels: %w", err)
			}
			o.Labels = l
		case "annotations":
			a, err := rawjson.StringMap(v)
			if err != nil {
				return fmt.Errorf("metadata.annotations: %w", err)
			}
			o.Annotations = a
			l.annOpen, l.annEmpty, l.annNull = m.ValueStart, len(a) == 0, a == nil
		case "finalizers":
			// The deletion protocol's marks (docs/views.md, "Deletion"): rare, so decoded
			// whenever present.
			if string(v) == "null" {
				o.Finalizers = nil
				return nil
			}
			o.Finalizers = o.Finalizers[:0]
			_, err := rawjson.WalkArray(data, m.ValueStart, func(start, end int) error {
				f, err := rawjson.Unquote(data[start:end])
				if err != nil {
					return fmt.Errorf("metadata.finalizers holds a value that is not a string")
				}
				o.Finalizers = append(o.Finalizers, f)
				return nil
			})
			return err
		case "deletionTimestamp":
			if string(v) == "null" {
				o.DeletionTimestamp = nil
				return nil
			}
			t := &metav1.Time{}
			if err := t.UnmarshalJSON(v); err != nil {
				return fmt.Errorf("metadata.deletionTimestamp: %w", err)
			}
			o.DeletionTimestamp = t
		case "managedFields":
			// The last managedFields member counts, as the one a decoder keeps.
			managed, hasManaged, hasAfter = m, true, false
			before, hasBefore = previous, members > 1
		}
		return nil
	})
	if err != nil {
		return l, err
	}
	l.open, l.empty = open, members == 0
	if !hasManaged {
		return l, nil
	}
	if members == 1 {
		l.empty = true
	}
	switch {
	case hasAfter: // the member and the comma after it
		l.cutStart, l.cutEnd = managed.Start, after.Start
	case hasBefore: // the last member and the comma before it
		l.cutStart, l.cutEnd = before.End, managed.End
	default: // the only member
		l.cutStart, l.cutEnd = managed.Start, managed.End
	}
	return l, nil
}

// decodeString decodes the JSON string v into *dst; null leaves it empty. field names the
// value in the error.
func decodeString(v []byte, dst *string, field string) error {
	if string(v) == "null" {
		return nil
	}
	s, err := rawjson.Unquote(v)
	if err != nil {
		return fmt.Errorf("%s is not a string", field)
	}
	*dst = s
	return nil
}

// List is a list of the source's objects as Objects (the answer of List with an object client).
type List struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the list's objects: pointers, so that client-go's reflector hands the cache
	// these very Objects (meta.ExtractListWithAlloc copies items held by value).
	Items []*Object `json:"items"`
}

var _ runtime.Object = &List{}

// DeepCopyObject implements runtime.Object. The copies share the objects' JSON bytes.
func (l *List) DeepCopyObject() runtime.Object {
	c := &List{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	c.Items = make([]*Object, len(l.Items))
	for i := range l.Items {
		c.Items[i] = l.Items[i].DeepCopyObject().(*Object)
	}
	return c
}

// decodeList decodes a list body into l: apiVersion, kind and metadata (ListMeta, decoded as
// Kubernetes does: sigs.k8s.io/json, case-sensitive) and each item as an Object (DecodeObject,
// adding add). An item that DecodeObject refuses is in l.Items as an Object that carries the
// error (DecodeItem): one such item does not fail the list. The body is walked, not decoded
// into a tree (a first list of a resource is the bulk of the cache's start-up), and each item
// is validated once, by DecodeObject; text the walker cannot split into items is an error.
func decodeList(data []byte, l *List, add Annotation) error {
	*l = List{}
	_, end, err := rawjson.WalkObject(data, 0, func(m rawjson.Member) error {
		v := data[m.ValueStart:m.End]
		switch string(rawjson.MemberName(m.Key)) {
		case "apiVersion":
			return decodeString(v, &l.APIVersion, "apiVersion")
		case "kind":
			return decodeString(v, &l.Kind, "kind")
		case "metadata":
			if err := kjson.UnmarshalCaseSensitivePreserveInts(v, &l.ListMeta); err != nil {
				return fmt.Errorf("metadata: %w", err)
			}
		case "items":
			if string(v) == "null" {
				return nil
			}
			_, err := rawjson.WalkArray(data, m.ValueStart, func(start, end int) error {
				l.Items = append(l.Items, DecodeItem(data[start:end], add))
				return nil
			})
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cannot decode a list of the source: %w", err)
	}
	if i := rawjson.SkipSpace(data, end); i != len(data) {
		return fmt.Errorf("cannot decode a list of the source: unexpected data after the list at offset %d", i)
	}
	itemKind := strings.TrimSuffix(l.Kind, "List")
	for _, o := range l.Items {
		if o.decodeErr == nil {
			o.setTypeMeta(l.APIVersion, itemKind)
		}
	}
	return nil
}

// setTypeMeta gives an item of a list without apiVersion and kind those of the list's items:
// kube-apiserver writes neither on the items of a list of a built-in resource (a ConfigMapList's
// items are ConfigMaps), and client-go's unstructured decoding fills them in the same way
// (UnstructuredJSONScheme, decodeToList). Without them the object's JSON does not decode as an
// unstructured object (its Kind is required), so the cache could not render it. An item with
// either already set, or a list without a kind, is left as it is. The JSON gets them in a new
// slice of the exact size, after the opening brace.
func (o *Object) setTypeMeta(apiVersion, kind string) {
	if o.APIVersion != "" || o.Kind != "" || apiVersion == "" || kind == "" {
		return
	}
	raw := o.raw.Bytes()
	open := rawjson.SkipSpace(raw, 0)
	if open >= len(raw) || raw[open] != '{' {
		return
	}
	av, _ := json.Marshal(apiVersion)
	k, _ := json.Marshal(kind)
	insert := make([]byte, 0, len(av)+len(k)+len(`"apiVersion":,"kind":,`))
	insert = append(append(append(append(insert, `"apiVersion":`...), av...), `,"kind":`...), k...)
	if next := rawjson.SkipSpace(raw, open+1); next < len(raw) && raw[next] != '}' {
		insert = append(insert, ',')
	}
	o.raw = rawjson.Splice(o.raw, -1, -1, open+1, 0, insert)
	o.APIVersion, o.Kind = apiVersion, kind
}
