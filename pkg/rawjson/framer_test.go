package rawjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// validSamples are JSON texts that exercise every part of the grammar.
var validSamples = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1.5e+10`, `-12.25E-3`, `true`, `false`, `null`,
	` { "a" : [ 1 , 2.0 , -3e4 , "x\"y\\z\/\b\f\n\r\t\u00e9\uD83D\uDE00" , true , false , null , { } , [ ] ] } `,
	`{"type":"MODIFIED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","annotations":{"k":"<&>"}},"data":{"x":"ü \u2028"}}}`,
	"{\"raw\":\"\xff\xfe not UTF-8\"}",
}

// TestValidJSONAgreesWithEncodingJSON checks Valid against encoding/json.Valid on the
// samples, on known-bad texts, and on thousands of random one-byte mutations and truncations
// of the samples.
func TestValidJSONAgreesWithEncodingJSON(t *testing.T) {
	bad := []string{
		``, ` `, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[1 2]`, `{a:1}`, `01`, `-`, `1.`, `1e`, `.5`,
		`+1`, `tru`, `nul`, `"abc`, "\"a\tb\"", `"\x"`, `"\u12G4"`, `{"a":1}}`, `[1][2]`, `{"a" 1}`, `NaN`,
	}
	check := func(text string) {
		t.Helper()
		got, want := Valid([]byte(text)) == nil, json.Valid([]byte(text))
		if got != want {
			t.Fatalf("Valid(%q) valid=%v, encoding/json says %v", text, got, want)
		}
	}
	for _, s := range append(append([]string{}, validSamples...), bad...) {
		check(s)
	}
	alphabet := []byte("{}[]\":,\\ 0123456789.eE+-tfnulrsa\x00\x1f\xff")
	r := rand.New(rand.NewSource(1))
	for _, s := range validSamples {
		for n := 0; n < 2000; n++ {
			b := []byte(s)
			b[r.Intn(len(b))] = alphabet[r.Intn(len(alphabet))]
			check(string(b))
			check(s[:r.Intn(len(s))])
		}
	}
	deep := strings.Repeat("[", maxNesting+1) + strings.Repeat("]", maxNesting+1)
	if err := Valid([]byte(deep)); !errors.Is(err, errTooDeep) {
		t.Errorf("text nested %d deep: %v, want %v", maxNesting+1, err, errTooDeep)
	}
}

// FuzzValidJSON checks Valid against encoding/json.Valid on any input.
func FuzzValidJSON(f *testing.F) {
	for _, s := range validSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b) == nil, json.Valid(b); got != want {
			t.Fatalf("Valid(%q) valid=%v, encoding/json says %v", b, got, want)
		}
	})
}

// readFrames reads every frame of r as client-go's streaming decoder does, with a buffer of
// size bytes that grows on io.ErrShortBuffer, and returns the frames and the error that ended
// the stream.
func readFrames(r io.ReadCloser, size int) ([]string, error) {
	var frames []string
	buf := make([]byte, size)
	for {
		base := 0
		for {
			n, err := r.Read(buf[base:])
			if err == io.ErrShortBuffer {
				base += n
				buf = append(buf, make([]byte, len(buf))...)
				continue
			}
			if err != nil {
				return frames, err
			}
			base += n
			break
		}
		frames = append(frames, string(buf[:base]))
	}
}

// TestWatchFramerFramesAsApimachinery checks that Framer cuts a stream into the same
// frames as apimachinery's JSON framer, whatever the chunks the stream arrives in and however
// small the reader's buffer, and that it ends as the stream does.
func TestWatchFramerFramesAsApimachinery(t *testing.T) {
	var stream strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&stream, `{"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"o%d"},"data":{"k":"%s \"}{\\\\"}}}`, i, strings.Repeat("v", i*97))
		stream.WriteString([]string{"\n", "", " \r\n\t", "\n\n"}[i%4])
	}
	want, err := readFrames(kjson.Framer.NewFrameReader(io.NopCloser(strings.NewReader(stream.String()))), 64)
	if err != io.EOF || len(want) != 50 {
		t.Fatalf("apimachinery's framer: %d frames, %v", len(want), err)
	}
	for _, c := range []struct {
		name string
		r    io.Reader
		size int
	}{
		{"whole", strings.NewReader(stream.String()), 64 * 1024},
		{"one byte at a time", iotest.OneByteReader(strings.NewReader(stream.String())), 16},
		{"half reads", iotest.HalfReader(strings.NewReader(stream.String())), 1},
	} {
		got, err := readFrames(Framer.NewFrameReader(io.NopCloser(c.r)), c.size)
		if err != io.EOF {
			t.Errorf("%s: the stream ended with %v, want io.EOF", c.name, err)
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: %d frames differ from apimachinery's %d", c.name, len(got), len(want))
		}
	}
}

// TestWatchFramerRejectsBadStreams checks that a stream cut inside a frame and a value that is
// not an object end the stream with an error naming the problem, and that the frames before
// them are read. (A frame whose object is malformed is framed: the object is validated when it
// is decoded, and skipped alone, TestWatchSkipsAnObjectThatDoesNotDecode.)
func TestWatchFramerRejectsBadStreams(t *testing.T) {
	for _, c := range []struct {
		stream string
		want   string
	}{
		{`{"type":"ADDED"} {"type":"ADD`, io.ErrUnexpectedEOF.Error()},
		{`{"type":"ADDED"} ["not","an","object"]`, "expected a JSON object"},
	} {
		frames, err := readFrames(Framer.NewFrameReader(io.NopCloser(strings.NewReader(c.stream))), 8)
		if len(frames) != 1 || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %d frames, error %v; want 1 frame and an error containing %q", c.stream, len(frames), err, c.want)
		}
	}
}

// BenchmarkWatchFramer reads a watch stream of 1,000 ConfigMap events with Framer and with
// apimachinery's JSON framer, per event: "plain" events of about 1.5 KiB, and "escaped" ones
// of about 8 KiB whose data is a script with an escaped newline every 40 bytes.
func BenchmarkWatchFramer(b *testing.B) {
	for _, c := range []struct {
		name    string
		payload string
	}{
		{"plain", strings.Repeat("x", 1300)},
		{"escaped", strings.Repeat(`echo \"step\" >> /var/log/x\n`, 250)},
	} {
		b.Run(c.name, func(b *testing.B) { benchmarkWatchFramer(b, c.payload) })
	}
}

func benchmarkWatchFramer(b *testing.B, payload string) {
	var stream bytes.Buffer
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&stream, `{"type":"MODIFIED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%05d","namespace":"ns","resourceVersion":"%d","labels":{"app":"bench"},"annotations":{"kcp.io/assigned-locations":"[\"loc-1\",\"loc-2\"]"}},"data":{"payload":"%s"}}}`+"\n", i, i+1, payload)
	}
	for _, c := range []struct {
		name   string
		framer interface {
			NewFrameReader(io.ReadCloser) io.ReadCloser
		}
	}{{"rawjson", Framer}, {"apimachinery", kjson.Framer}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(stream.Len()) / 1000)
			b.ReportAllocs()
			buf := make([]byte, 64*1024)
			for n := 0; n < b.N; {
				r := c.framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream.Bytes())))
				for ; n < b.N; n++ {
					if _, err := r.Read(buf); err != nil {
						if err == io.EOF {
							break
						}
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// FuzzFramer holds Framer to apimachinery's JSON framer: a stream of JSON objects is cut
// into the same frames, and any stream ends without a panic.
func FuzzFramer(f *testing.F) {
	for _, s := range validSamples {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"type":"ADDED","object":{"a":"}"}} {"type":"DELETED"}` + "\n" + `{"x":[{}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gotErr := readFrames(Framer.NewFrameReader(io.NopCloser(bytes.NewReader(data))), 16)
		if !objectStream(data) {
			return
		}
		want, wantErr := readFrames(kjson.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(data))), 16)
		if !errors.Is(gotErr, io.EOF) || !errors.Is(wantErr, io.EOF) || !reflect.DeepEqual(got, want) {
			t.Fatalf("frames of %q: %q (%v), apimachinery's: %q (%v)", data, got, gotErr, want, wantErr)
		}
	})
}

// objectStream reports whether data is a sequence of JSON objects separated by whitespace.
func objectStream(data []byte) bool {
	d := json.NewDecoder(bytes.NewReader(data))
	for {
		var m map[string]json.RawMessage
		err := d.Decode(&m)
		if err == io.EOF {
			return true
		}
		if err != nil || m == nil {
			return false
		}
	}
}
