package rawjson

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestNormalizeIsCompact checks that Normalize returns compact text that encoding/json reads as
// it reads the input: spaced text compacted, text the decoder reads its own way re-encoded,
// compact text kept as it is (the same bytes), and a number out of range refused.
func TestNormalizeIsCompact(t *testing.T) {
	for _, c := range []struct {
		in, want string
		shared   bool
	}{
		{`{"a":[1,"x y"],"b":{}}`, `{"a":[1,"x y"],"b":{}}`, true},
		{" { \"a\" : [ 1 , \"x y\" ] ,\n\"b\":{ } } ", `{"a":[1,"x y"],"b":{}}`, false},
		{`{"a":1,"a":2}`, `{"a":2}`, false},
		{"{\"a\": \"\xff\"}", `{"a":"` + "\ufffd" + `"}`, false},
		{`{"n":12345678901234567890}`, `{"n":12345678901234567890}`, true},
	} {
		got, _, err := Normalize([]byte(c.in))
		if err != nil {
			t.Fatalf("Normalize(%q): %v", c.in, err)
		}
		if got.String() != c.want {
			t.Errorf("Normalize(%q) = %s, want %s", c.in, got, c.want)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, got.Bytes()); err != nil || !bytes.Equal(buf.Bytes(), got.Bytes()) {
			t.Errorf("Normalize(%q) = %s is not compact (%v)", c.in, got, err)
		}
		if shared := len(c.in) > 0 && &got.Bytes()[0] == &[]byte(c.in)[0]; shared && !c.shared {
			t.Errorf("Normalize(%q) shares its input", c.in)
		}
	}
	if _, _, err := Normalize([]byte(`{"f":1e400}`)); err == nil {
		t.Error("Normalize accepted a number out of the range of a float64")
	}
	if _, _, err := Normalize([]byte(`{"a":}`)); err == nil {
		t.Error("Normalize accepted invalid text")
	}
}

// FuzzNormalize holds Normalize to encoding/json: it accepts what encoding/json accepts (but
// numbers out of range), and its text is compact (json.Compact leaves it as it is).
func FuzzNormalize(f *testing.F) {
	for _, s := range validSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, report, err := Normalize(data)
		if err != nil {
			if json.Valid(data) && report.BadNumber == nil {
				t.Fatalf("Normalize(%q): %v; encoding/json finds it valid", data, err)
			}
			return
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, got.Bytes()); err != nil || !bytes.Equal(buf.Bytes(), got.Bytes()) {
			t.Fatalf("Normalize(%q) = %q is not compact (%v)", data, got, err)
		}
	})
}
