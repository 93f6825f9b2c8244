package source

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kjson "sigs.k8s.io/json"
)

// Object is one object of the source as the source sent it: its JSON bytes, without
// metadata.managedFields (views never show them, DESIGN.md "The location view"), and the
// metadata the cache indexes, read from those bytes without decoding the rest (issue 12: a
// cached object is bytes). List and Watch hand the cache Objects when the Source has an
// object client (Config.Objects).
//
// ObjectMeta holds name, namespace, uid, resourceVersion, generation, labels and annotations
// only, so that client-go's reflector (meta.Accessor) and the cache can read them. An Object is
// never changed after decoding: JSON returns shared bytes.
type Object struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	// raw is the object's JSON without metadata.managedFields.
	raw []byte
	// metaOpen is the index of metadata's opening brace in raw and metaEmpty says it has no
	// member; annOpen is the index of metadata.annotations' value (-1 when there is no
	// annotations member): an opening brace, or with annNull the literal null; annEmpty says the
	// object has no member (WithAnnotation).
	metaOpen, annOpen            int
	metaEmpty, annEmpty, annNull bool
}

var (
	_ runtime.Object            = &Object{}
	_ metav1.ObjectMetaAccessor = &Object{}
	_ json.Unmarshaler          = &Object{}
)

// JSON returns the object's JSON as the source sent it, without metadata.managedFields. The
// slice is shared: do not change it.
func (o *Object) JSON() []byte { return o.raw }

// DeepCopyObject implements runtime.Object. The copy shares the (immutable) JSON bytes.
func (o *Object) DeepCopyObject() runtime.Object {
	c := *o
	o.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

// UnmarshalJSON implements json.Unmarshaler: it reads the metadata from data and keeps a copy
// of data without metadata.managedFields (DecodeObject).
func (o *Object) UnmarshalJSON(data []byte) error {
	d, err := DecodeObject(data)
	if err != nil {
		return err
	}
	*o = *d
	return nil
}

// DecodeObject reads an Object from data, one JSON object: apiVersion, kind and the metadata
// fields Object keeps, and a copy of data without metadata.managedFields. Only the metadata is
// decoded; spec, status and every other field are kept as the source wrote them. Errors name
// what is malformed (text that is not a JSON object, a metadata field of the wrong type).
func DecodeObject(data []byte) (*Object, error) {
	o := &Object{annOpen: -1, metaOpen: -1}
	cutStart, cutEnd := -1, -1
	_, end, err := walkObject(data, 0, func(m member) error {
		v := data[m.valueStart:m.end]
		switch memberName(m.key) {
		case "apiVersion":
			return decodeString(v, &o.APIVersion, "apiVersion")
		case "kind":
			return decodeString(v, &o.Kind, "kind")
		case "metadata":
			if string(v) == "null" {
				return nil
			}
			var err error
			cutStart, cutEnd, err = o.decodeMetadata(data, m.valueStart)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot decode an object of the source: %w", err)
	}
	if i := skipSpace(data, end); i != len(data) {
		return nil, fmt.Errorf("cannot decode an object of the source: unexpected data after the object at offset %d", i)
	}
	if cutStart < 0 {
		o.raw = bytes.Clone(data)
		return o, nil
	}
	cut := cutEnd - cutStart
	o.raw = make([]byte, 0, len(data)-cut)
	o.raw = append(append(o.raw, data[:cutStart]...), data[cutEnd:]...)
	if o.metaOpen > cutStart {
		o.metaOpen -= cut
	}
	if o.annOpen > cutStart {
		o.annOpen -= cut
	}
	return o, nil
}

// decodeMetadata reads the metadata object that starts at data[i] into o and returns the byte
// range of its managedFields member (with one separating comma) to cut, or -1, -1.
func (o *Object) decodeMetadata(data []byte, i int) (cutStart, cutEnd int, err error) {
	var members []member
	managed := -1
	open, _, err := walkObject(data, i, func(m member) error {
		v := data[m.valueStart:m.end]
		members = append(members, m)
		switch memberName(m.key) {
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
			l, err := stringMap(v)
			if err != nil {
				return fmt.Errorf("metadata.labels: %w", err)
			}
			o.Labels = l
		case "annotations":
			a, err := stringMap(v)
			if err != nil {
				return fmt.Errorf("metadata.annotations: %w", err)
			}
			o.Annotations = a
			o.annOpen, o.annEmpty, o.annNull = m.valueStart, len(a) == 0, a == nil
		case "managedFields":
			managed = len(members) - 1
		}
		return nil
	})
	if err != nil {
		return -1, -1, err
	}
	o.metaOpen, o.metaEmpty = open, len(members) == 0
	if managed < 0 {
		return -1, -1, nil
	}
	if len(members) == 1 {
		o.metaEmpty = true
	}
	m := members[managed]
	switch {
	case managed < len(members)-1: // the member and the comma after it
		return m.start, members[managed+1].start, nil
	case managed > 0: // the last member and the comma before it
		return members[managed-1].end, m.end, nil
	default: // the only member
		return m.start, m.end, nil
	}
}

// WithAnnotation returns a copy of the object's JSON with metadata.annotations[key] set to
// value. The object must not have the annotation already (the caller checks Annotations); an
// error is returned when it does, or when the object has no metadata object.
func (o *Object) WithAnnotation(key, value string) ([]byte, error) {
	if _, ok := o.Annotations[key]; ok {
		return nil, fmt.Errorf("the object has the annotation %q already", key)
	}
	if o.metaOpen < 0 {
		return nil, fmt.Errorf("the object has no metadata")
	}
	k, _ := json.Marshal(key)
	v, _ := json.Marshal(value)
	var at, replace int
	var insert []byte
	switch {
	case o.annNull:
		at, replace = o.annOpen, len("null")
		insert = append(append(append(append([]byte{'{'}, k...), ':'), v...), '}')
	case o.annOpen >= 0:
		at = o.annOpen + 1
		insert = append(append(append(insert, k...), ':'), v...)
		if !o.annEmpty {
			insert = append(insert, ',')
		}
	default:
		at = o.metaOpen + 1
		insert = append(append(append(append([]byte(`"annotations":{`), k...), ':'), v...), '}')
		if !o.metaEmpty {
			insert = append(insert, ',')
		}
	}
	out := make([]byte, 0, len(o.raw)+len(insert)-replace)
	return append(append(append(out, o.raw[:at]...), insert...), o.raw[at+replace:]...), nil
}

// memberName returns the name a member's key token denotes, without allocating when the key
// has no escapes (every key a Kubernetes API server writes).
func memberName(key []byte) string {
	if bytes.IndexByte(key, '\\') < 0 && len(key) >= 2 {
		return string(key[1 : len(key)-1])
	}
	s, _ := unquote(key)
	return s
}

// decodeString decodes the JSON string v into *dst; null leaves it empty. field names the
// value in the error.
func decodeString(v []byte, dst *string, field string) error {
	if string(v) == "null" {
		return nil
	}
	s, err := unquote(v)
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
	// Items are the list's objects.
	Items []Object `json:"items"`
}

var _ runtime.Object = &List{}

// DeepCopyObject implements runtime.Object. The copies share the objects' JSON bytes.
func (l *List) DeepCopyObject() runtime.Object {
	c := &List{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	c.Items = make([]Object, len(l.Items))
	for i := range l.Items {
		c.Items[i] = *l.Items[i].DeepCopyObject().(*Object)
	}
	return c
}

// decodeList decodes a list body into l: its metadata as Kubernetes does
// (sigs.k8s.io/json, case-sensitive), each item as an Object.
func decodeList(data []byte, l *List) error {
	return kjson.UnmarshalCaseSensitivePreserveInts(data, l)
}
