package view

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The view's compact JSON encoder (typingEncoder over the json serializer) writes what the
// cache already holds as bytes straight from those bytes: lists (writeList), objects
// (writeObject) and watch events whose object is encoded (writeWatchEvent). encoding/json
// would validate and compact each of them again (it does so with whatever a json.Marshaler or
// a RawExtension returns), which was nearly all of a LIST's CPU (BenchmarkEncodeList) and, on
// the watch path, 12% of mapper-apiserver's CPU while 1,000 view watches followed the source
// (bench scenario 2's profile: encoding/json.appendCompact under CacheEncode). The bytes are
// valid and compact because the cache keeps each version's JSON as a rawjson.Compact, which
// only pkg/rawjson makes: normalized and compacted at ingest (rawjson.Normalize, by the
// source's object client), or written by encoding/json (rawjson.Marshal: a decoded or rendered
// view). A template view is written in pieces: its Compact with holes filled by encoding/json's
// text (pkg/cache template.go).

// jsonWriter is an object that writes its own JSON, valid and compact (cache.Object's views,
// from their rawjson.Compact, and the objects the apiserver's encoders get from its
// CacheEncode).
type jsonWriter interface {
	WriteJSON(w io.Writer) error
}

// listBufferSize is the buffer between a list's items and the response: the HTTP/2 server's
// own buffer is 4 KiB and hands each full buffer to its connection's serving goroutine, so
// writing items straight to it would cost a goroutine hand-off per 4 KiB.
const listBufferSize = 32 * 1024

// listWriters keeps the buffered writers of writeList between LISTs: a new 32 KiB buffer per
// LIST was a third of the bytes a LIST allocated (a view LIST of 120 ConfigMaps allocated
// 97 KB).
var listWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, listBufferSize) }}

// writeList writes a view List as JSON the way apimachinery's streaming collection encoder
// does ({"kind","apiVersion","metadata","items":[...]}), taking each item's bytes from
// the item itself (cache.Object's WriteJSON writes the bytes kept per object version).
func writeList(l *List, w io.Writer) error {
	bw := listWriters.Get().(*bufio.Writer)
	bw.Reset(w)
	defer func() {
		bw.Reset(nil) // keep no reference to the response
		listWriters.Put(bw)
	}()
	head := struct {
		Kind       string      `json:"kind,omitempty"`
		APIVersion string      `json:"apiVersion,omitempty"`
		Metadata   interface{} `json:"metadata"`
	}{l.Kind, l.APIVersion, &l.ListMeta}
	b, err := json.Marshal(head)
	if err != nil {
		return err
	}
	bw.Write(b[:len(b)-1]) // without the closing brace
	bw.WriteString(`,"items":[`)
	for i, item := range l.Items {
		if i > 0 {
			bw.WriteByte(',')
		}
		if err := writeItem(bw, item); err != nil {
			return err
		}
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}

// writeItem writes an item's JSON: from its own bytes when it has them (cache.Object's
// WriteJSON, which writes a view made from its object's JSON without building it), else
// encoding/json's.
func writeItem(w io.Writer, item runtime.Object) error {
	if jw, ok := item.(jsonWriter); ok {
		return jw.WriteJSON(w)
	}
	var raw []byte
	var err error
	if m, ok := item.(json.Marshaler); ok {
		raw, err = m.MarshalJSON()
	} else {
		raw, err = json.Marshal(item)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(raw)
	return err
}

// writeObject writes an object that holds its JSON as json.Encoder does: the JSON and a
// newline.
func writeObject(obj jsonWriter, w io.Writer) error {
	if err := obj.WriteJSON(w); err != nil {
		return err
	}
	_, err := w.Write(newline)
	return err
}

// newline ends each JSON document json.Encoder writes.
var newline = []byte{'\n'}

// writeWatchEvent writes a watch event whose object is encoded already (ev.Object.Raw, as the
// apiserver's watch encoder hands it over: the embedded encoder's output) as json.Encoder
// writes a metav1.WatchEvent: {"type":<type>,"object":<raw>} and a newline, raw without its
// trailing newline. It returns false, writing nothing, for an event it cannot write so (an
// object that is not encoded, or a type that is not a plain word): the caller encodes those.
func writeWatchEvent(ev *metav1.WatchEvent, w io.Writer) (bool, error) {
	raw := bytes.TrimRight(ev.Object.Raw, " \t\r\n")
	if ev.Object.Object != nil || len(raw) == 0 || !plainWord(ev.Type) {
		return false, nil
	}
	buf := make([]byte, 0, len(`{"type":"","object":}`)+len(ev.Type)+len(raw)+1)
	buf = append(buf, `{"type":"`...)
	buf = append(buf, ev.Type...)
	buf = append(buf, `","object":`...)
	buf = append(buf, raw...)
	buf = append(buf, "}\n"...)
	_, err := w.Write(buf)
	return true, err
}

// plainWord reports whether s is a non-empty run of ASCII letters, which JSON writes between
// quotes as it is (every watch.EventType is one).
func plainWord(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return s != ""
}
