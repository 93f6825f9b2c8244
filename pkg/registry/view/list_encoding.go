package view

import (
	"bufio"
	"encoding/json"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
)

// writeList writes a view List as JSON the way apimachinery's streaming collection encoder
// does ({"kind","apiVersion","metadata","items":[...]}), taking each item's bytes from
// the item itself (cache.Object's MarshalJSON returns the bytes encoded once per object
// version).
//
// It exists because encoding/json validates and compacts whatever a json.Marshaler returns:
// through json.Marshal every cached item was scanned again on every LIST, which was nearly
// all of a LIST's CPU (BenchmarkEncodeList). The items' bytes were produced by encoding/json
// itself, so they are valid and compact already.
func writeList(l *List, w io.Writer) error {
	bw := bufio.NewWriterSize(w, 32*1024)
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
		raw, err := itemJSON(item)
		if err != nil {
			return err
		}
		bw.Write(raw)
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}

// itemJSON returns an item's JSON: its own cached bytes when it has them, else encoding/json's.
func itemJSON(item runtime.Object) ([]byte, error) {
	if m, ok := item.(json.Marshaler); ok {
		return m.MarshalJSON()
	}
	return json.Marshal(item)
}
