package source

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cluster-mapper/cluster-mapper/pkg/rawjson"
)

// The hand-written JSON readers (pkg/rawjson's walker and value lookup, this package's object
// decoder), each held to encoding/json or sigs.k8s.io/json on the same input, seeded with the
// objects this package decodes. `go test` runs each Fuzz function on its seeds (the texts of
// the unit tests: objectDocs, decoderCases); `go test -fuzz FuzzX ./pkg/source` explores
// further. pkg/rawjson holds its validator and framer to encoding/json and apimachinery the
// same way (FuzzValidJSON, FuzzFramer).

// fuzzSeeds adds every JSON text of the unit tests to f.
func fuzzSeeds(f *testing.F) {
	for _, doc := range objectDocs {
		f.Add([]byte(doc))
	}
	for _, doc := range decoderCases {
		f.Add([]byte(doc))
	}
}

// lastMembers returns the members of the JSON object data as encoding/json reads them: the
// text of each name's value, the last member of a name counting.
func lastMembers(data []byte) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil || m == nil {
		return nil, false
	}
	return m, true
}

// FuzzWalker holds WalkObject and WalkArray to encoding/json: on valid text they find the
// members (names as encoding/json unquotes them, values as written) and elements
// encoding/json finds, and on any text they never panic or read out of bounds.
func FuzzWalker(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		got := map[string]json.RawMessage{}
		_, end, err := rawjson.WalkObject(data, 0, func(m rawjson.Member) error {
			name, err := rawjson.Unquote(m.Key)
			if err != nil {
				return err
			}
			got[name] = json.RawMessage(data[m.ValueStart:m.End])
			return nil
		})
		if want, ok := lastMembers(data); ok {
			if err != nil || rawjson.SkipSpace(data, end) != len(data) {
				t.Fatalf("rawjson.WalkObject(%q): %v, end %d; encoding/json reads an object", data, err, end)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("rawjson.WalkObject(%q) = %q, encoding/json reads %q", data, got, want)
			}
		}
		var elements []json.RawMessage
		_, aerr := rawjson.WalkArray(data, 0, func(start, end int) error {
			elements = append(elements, json.RawMessage(data[start:end]))
			return nil
		})
		var want []json.RawMessage
		if json.Unmarshal(data, &want) == nil && want != nil {
			if aerr != nil || len(elements) != len(want) {
				t.Fatalf("rawjson.WalkArray(%q): %q, %v; encoding/json reads %q", data, elements, aerr, want)
			}
			for i := range want {
				if !bytes.Equal(elements[i], want[i]) {
					t.Fatalf("rawjson.WalkArray(%q) element %d = %q, encoding/json reads %q", data, i, elements[i], want[i])
				}
			}
		}
	})
}

// FuzzValueRange holds ValueRange and MemberRange to encoding/json: on a valid object, the
// value at a path of one or two names is the one encoding/json finds there, a path through a
// name that occurs twice is an error, and removing the member's cut leaves valid JSON that
// decodes to the object without that member.
func FuzzValueRange(f *testing.F) {
	for _, doc := range objectDocs {
		f.Add([]byte(doc), "metadata", "annotations")
		f.Add([]byte(doc), "metadata", "name")
	}
	for _, doc := range decoderCases {
		f.Add([]byte(doc), "metadata", "labels")
	}
	f.Add([]byte(`{"a":{"b":1},"c":2}`), "c", "")
	f.Fuzz(func(t *testing.T, data []byte, first, second string) {
		path := []string{first}
		if second != "" {
			path = append(path, second)
		}
		span, found, err := rawjson.MemberRange(data, path...)
		if !json.Valid(data) || !utf8Clean(data) {
			return // any result, but no panic
		}
		top, ok := lastMembers(data)
		if !ok {
			return
		}
		// What encoding/json finds at the path, and whether a name on it occurs twice.
		var want json.RawMessage
		members, duplicate := top, countName(data, first) > 1
		raw, has := members[first]
		if has && len(path) == 2 {
			inner, ok := lastMembers(raw)
			raw, has = inner[second], ok && inner[second] != nil
			duplicate = duplicate || ok && countName(raw0(members[first]), second) > 1
		}
		if has {
			want = raw
		}
		switch {
		case duplicate:
			if err == nil && found {
				t.Fatalf("rawjson.MemberRange(%q, %q) found a member on a path with a name twice", data, path)
			}
		case err != nil:
			t.Fatalf("rawjson.MemberRange(%q, %q): %v", data, path, err)
		case found != (want != nil):
			t.Fatalf("rawjson.MemberRange(%q, %q): found %v, encoding/json: %q", data, path, found, want)
		case found:
			if got := data[span.ValueStart:span.End]; !bytes.Equal(got, want) {
				t.Fatalf("rawjson.MemberRange(%q, %q) = %q, encoding/json reads %q", data, path, got, want)
			}
			cut := append(append([]byte(nil), data[:span.CutStart]...), data[span.CutEnd:]...)
			var gotObj, wantObj interface{}
			if err := json.Unmarshal(cut, &gotObj); err != nil {
				t.Fatalf("removing the member %q of %q leaves %q: %v", path, data, cut, err)
			}
			_ = json.Unmarshal(data, &wantObj)
			parent := wantObj.(map[string]interface{})
			for _, name := range path[:len(path)-1] {
				parent = parent[name].(map[string]interface{})
			}
			delete(parent, path[len(path)-1])
			if !reflect.DeepEqual(gotObj, wantObj) {
				t.Fatalf("removing the member %q of %q leaves %q", path, data, cut)
			}
		}
	})
}

// raw0 returns raw, or an empty object for nil.
func raw0(raw json.RawMessage) []byte {
	if raw == nil {
		return []byte(`{}`)
	}
	return raw
}

// countName returns how many members of the JSON object data are named name (encoding/json's
// unquoting); 0 for text that is not an object.
func countName(data []byte, name string) int {
	n := 0
	_, _, _ = rawjson.WalkObject(data, 0, func(m rawjson.Member) error {
		if s, err := rawjson.Unquote(m.Key); err == nil && s == name {
			n++
		}
		return nil
	})
	return n
}

// utf8Clean reports whether data needs no normalizing (rawjson.Check): ValueRange compares names
// as encoding/json does only on such text, which DecodeObject keeps.
func utf8Clean(data []byte) bool {
	r, err := rawjson.Check(data)
	return err == nil && !r.Normalize
}

// FuzzDecodeObject holds DecodeObject to kube-apiserver's decoder (sigs.k8s.io/json,
// checkReadAsDecoderReads): it refuses what the decoder refuses; what it accepts, it keeps as
// bytes that decode to the same object without managedFields, with the same metadata, and that
// the cache's unstructured decoding reads (Object.Content never fails on them) when they have
// a kind. It never panics.
func FuzzDecodeObject(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if checkReadAsDecoderReads(t, data) != nil {
			return
		}
		o, _ := DecodeObject(data, Annotation{Key: "kcp.io/cluster", Value: "root"})
		if o.Kind == "" {
			return
		}
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(o.JSON().Bytes()); err != nil {
			t.Fatalf("the kept bytes %q of %q do not decode as an unstructured object: %v", o.JSON().Bytes(), data, err)
		}
		if o.Annotations["kcp.io/cluster"] != u.GetAnnotations()["kcp.io/cluster"] {
			t.Fatalf("the added annotation of %q: %v, decoded %v", data, o.Annotations, u.GetAnnotations())
		}
	})
}
