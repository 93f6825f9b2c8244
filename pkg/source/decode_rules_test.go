package source

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
)

// decoderCases are objects whose text kube-apiserver's decoder (sigs.k8s.io/json, non-strict)
// does not read as written: invalid UTF-8, member names twice (also written differently),
// numbers outside the range of a float64.
var decoderCases = map[string]string{
	"invalid UTF-8 in a label":  "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\",\"labels\":{\"app\":\"x\xffy\"}},\"data\":{\"k\":\"\xc3\"}}",
	"invalid UTF-8 in a key":    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\",\"annotations\":{\"n\xfe\":\"v\"}}}",
	"name twice":                `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","name":"b"}}`,
	"labels twice":              `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"app":"x"},"labels":{"app":"y","tier":"z"}}}`,
	"label key twice":           `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"app":"x","app":"y"}}}`,
	"escaped key twice":         `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"app":"x","\u0061pp":"y"}}}`,
	"managedFields twice":       `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"managedFields":[{"manager":"a"}],"name":"a","managedFields":[{"manager":"b"}]}}`,
	"metadata twice":            `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{},"metadata":{"name":"b","annotations":{"k":"v"}}}`,
	"many data keys, one twice": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"a":"1","b":"2","c":"3","d":"4","e":"5","f":"6","g":"7","h":"8","i":"9","j":"10","c":"x"}}`,
	"number out of range":       `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"spec":{"n":1e400}}`,
	"negative out of range":     `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"spec":[-2e308]}`,
	"long integer out of range": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"spec":{"n":` + strings.Repeat("9", 400) + `}}`,
	"large but in range":        `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"spec":{"n":1.7e308,"m":99999999999999999999,"u":1e-400}}`,
}

// checkReadAsDecoderReads checks DecodeObject against kube-apiserver's decoder on data: it
// refuses what the decoder refuses, and for what it accepts, the kept bytes decode to what
// data decodes to (without managedFields), hold valid UTF-8 and no member name twice, and the
// metadata it read is the decoded metadata. It returns DecodeObject's error.
func checkReadAsDecoderReads(t *testing.T, data []byte) error {
	t.Helper()
	o, err := DecodeObject(data, Annotation{})
	var want interface{}
	decErr := kjson.UnmarshalCaseSensitivePreserveInts(data, &want)
	if err != nil {
		return err
	}
	if decErr != nil {
		t.Fatalf("DecodeObject accepted %q, which the decoder refuses: %v", data, decErr)
	}
	wantObj, ok := want.(map[string]interface{})
	if !ok {
		t.Fatalf("DecodeObject accepted %q, which is not an object", data)
	}
	var got map[string]interface{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(o.JSON().Bytes(), &got); err != nil {
		t.Fatalf("the kept bytes %q of %q do not decode: %v", o.JSON().Bytes(), data, err)
	}
	meta, _ := wantObj["metadata"].(map[string]interface{})
	delete(meta, "managedFields")
	if !reflect.DeepEqual(got, wantObj) {
		t.Fatalf("the kept bytes of %q decode to\n%v\nwant\n%v", data, got, wantObj)
	}
	if !utf8.Valid(o.JSON().Bytes()) {
		t.Fatalf("the kept bytes %q hold invalid UTF-8", o.JSON().Bytes())
	}
	var strict interface{}
	if errs, err := kjson.UnmarshalStrict(o.JSON().Bytes(), &strict, kjson.DisallowDuplicateFields); err != nil || len(errs) > 0 {
		t.Fatalf("the kept bytes %q have a member name twice: %v %v", o.JSON().Bytes(), errs, err)
	}
	var typed struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata"`
	}
	if kjson.UnmarshalCaseSensitivePreserveInts(o.JSON().Bytes(), &typed) == nil {
		if o.Name != typed.Name || o.Namespace != typed.Namespace || o.UID != typed.UID || o.ResourceVersion != typed.ResourceVersion ||
			o.Generation != typed.Generation || o.APIVersion != typed.APIVersion || o.Kind != typed.Kind {
			t.Fatalf("metadata of %q: %+v %+v, the decoder reads %+v %+v", data, o.TypeMeta, o.ObjectMeta, typed.TypeMeta, typed.ObjectMeta)
		}
		for _, m := range [][2]map[string]string{{o.Labels, typed.Labels}, {o.Annotations, typed.Annotations}} {
			if len(m[0])+len(m[1]) > 0 && !reflect.DeepEqual(m[0], m[1]) {
				t.Fatalf("labels or annotations of %q: %v, the decoder reads %v", data, m[0], m[1])
			}
		}
		if len(o.Finalizers)+len(typed.Finalizers) > 0 && !reflect.DeepEqual(o.Finalizers, typed.Finalizers) {
			t.Fatalf("finalizers of %q: %v, the decoder reads %v", data, o.Finalizers, typed.Finalizers)
		}
	}
	return nil
}

// TestDecodeObjectReadsTextAsTheDecoderDoes: invalid UTF-8 and duplicate member names are
// normalized (the index sees what a client decodes), numbers outside the range of a float64
// are refused.
func TestDecodeObjectReadsTextAsTheDecoderDoes(t *testing.T) {
	for name, doc := range decoderCases {
		t.Run(name, func(t *testing.T) {
			err := checkReadAsDecoderReads(t, []byte(doc))
			if wantErr := strings.Contains(name, "out of range"); (err != nil) != wantErr {
				t.Fatalf("error %v, want one: %v", err, wantErr)
			}
		})
	}
}

// TestDecodeListSkipsItemsThatDoNotDecode: one item that does not decode does not fail the
// list; it is an Object that carries the error and what could be read of its metadata.
func TestDecodeListSkipsItemsThatDoNotDecode(t *testing.T) {
	doc := `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[` +
		`{"metadata":{"name":"a","resourceVersion":"3"}},` +
		`{"metadata":{"name":"b","namespace":"ns","uid":"u-b","resourceVersion":"4","generation":"x","annotations":{"k":"v"}}},` +
		`{"metadata":{"name":"c","resourceVersion":"5"},"data":{"n":1e999}},` +
		`{"metadata":{"name":"d","resourceVersion":"6"},"data":{"bad":01}},` +
		`7,` +
		`{"metadata":{"name":"e","resourceVersion":"8"}}]}`
	var l List
	if err := decodeList([]byte(doc), &l, Annotation{}); err != nil {
		t.Fatalf("decodeList: %v", err)
	}
	var good, bad []string
	for _, o := range l.Items {
		if o.DecodeError() != nil {
			bad = append(bad, o.Name)
			if o.JSON().Bytes() != nil {
				t.Errorf("%s: an object that does not decode has JSON", o.Name)
			}
			continue
		}
		good = append(good, o.Name)
		if o.Kind != "ConfigMap" {
			t.Errorf("%s: kind %q", o.Name, o.Kind)
		}
	}
	if strings.Join(good, ",") != "a,e" || strings.Join(bad, ",") != "b,c,d," {
		t.Fatalf("good items %v, items that do not decode %v", good, bad)
	}
	b := l.Items[1]
	if b.Namespace != "ns" || b.UID != "u-b" || b.ResourceVersion != "4" || b.Annotations["k"] != "v" {
		t.Errorf("the metadata read of an item that does not decode: %+v", b.ObjectMeta)
	}
	if !strings.Contains(l.Items[2].DecodeError().Error(), "out of the range of a 64-bit float") {
		t.Errorf("the error of an item with a number out of range: %v", l.Items[2].DecodeError())
	}
}

// TestWatchSkipsAnObjectThatDoesNotDecode: the object of a watch event that does not decode is
// an Object that carries the error, not an error that would end the watch.
func TestWatchSkipsAnObjectThatDoesNotDecode(t *testing.T) {
	for _, raw := range []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"7"},"data":{"a":01}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"7"},"data":{"n":-1e309}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":5,"resourceVersion":"7"}}`,
	} {
		obj, _, err := objectCodec{}.Decode([]byte(raw), nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		o, ok := obj.(*Object)
		if !ok || o.DecodeError() == nil || o.ResourceVersion != "7" {
			t.Fatalf("%s: %T %+v, want an Object carrying the error at resourceVersion 7", raw, obj, obj)
		}
	}
}
