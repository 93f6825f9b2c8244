package rawjson

import (
	"encoding/json"
	"errors"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// TestValueRange checks that ValueRange finds the value at a path as encoding/json reads it,
// reports a missing member or a value on the way that is not an object as not found, and
// refuses a member on the path that occurs twice and malformed text.
func TestValueRange(t *testing.T) {
	const obj = `{"apiVersion":"v1", "metadata" : {"name":"a","generation": 7,"annotations":{"x\"y":"{\"status\":1}","kcp.io/assigned-locations":"[\"east\"]"}},"spec":{"status":[1,{"a":"}"}]},"status":{"s":"b"} }`
	for _, c := range []struct {
		path []string
		// want is the value as encoding/json decodes it; nil: not found.
		want interface{}
	}{
		{[]string{"metadata", "generation"}, 7.0},
		{[]string{"status"}, map[string]interface{}{"s": "b"}},
		{[]string{"metadata", "annotations", "kcp.io/assigned-locations"}, `["east"]`},
		{[]string{"metadata", "annotations", `x"y`}, `{"status":1}`},
		{[]string{"spec", "status"}, []interface{}{1.0, map[string]interface{}{"a": "}"}}},
		{[]string{"metadata", "uid"}, nil},
		{[]string{"apiVersion", "x"}, nil}, // a string on the way
		{[]string{"spec", "status", "a"}, nil},
		{[]string{"statu"}, nil},
	} {
		start, end, found, err := ValueRange([]byte(obj), c.path...)
		if err != nil {
			t.Errorf("%v: %v", c.path, err)
			continue
		}
		if found != (c.want != nil) {
			t.Errorf("%v: found %v, want %v", c.path, found, c.want != nil)
			continue
		}
		if !found {
			continue
		}
		var got interface{}
		if err := json.Unmarshal([]byte(obj[start:end]), &got); err != nil {
			t.Errorf("%v: %q is not a value: %v", c.path, obj[start:end], err)
		} else if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v: got %#v, want %#v", c.path, got, c.want)
		}
	}

	if _, _, _, err := ValueRange([]byte(`{"status":{},"metadata":{},"status":{"a":1}}`), "status"); !errors.Is(err, ErrDuplicateMember) {
		t.Errorf("a member twice: %v", err)
	}
	if _, _, found, err := ValueRange([]byte(`{"status":{},"metadata":{"a":1,"a":2}}`), "status"); err != nil || !found {
		t.Errorf("a member twice off the path: found %v, %v", found, err)
	}
	for _, bad := range []string{`{"status":`, `["status"]`, `{"status" 1}`, `{"metadata":{"generation":1`} {
		if _, _, _, err := ValueRange([]byte(bad), "metadata", "generation"); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// TestSkipStringEndsWhereEncodingJSONDoes checks skipString against encoding/json on strings
// made of quotes, backslashes and other bytes: it must return the end of the string token,
// whatever escapes come before its closing quote.
func TestSkipStringEndsWhereEncodingJSONDoes(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	alphabet := []string{`"`, `\`, `\\`, `\"`, "a", "é", "\n", "}"}
	for n := 0; n < 20000; n++ {
		var b strings.Builder
		for i := r.Intn(12); i > 0; i-- {
			b.WriteString(alphabet[r.Intn(len(alphabet))])
		}
		tok, err := json.Marshal(b.String())
		if err != nil {
			t.Fatal(err)
		}
		text := append(append([]byte(nil), tok...), `,"x\""}`...)
		if end, err := skipString(text, 0); err != nil || end != len(tok) {
			t.Fatalf("%s: end %d (%v), want %d", text, end, err, len(tok))
		}
		if _, err := skipString(tok[:len(tok)-1], 0); err == nil {
			t.Fatalf("%s without its closing quote: no error", tok)
		}
	}
}
