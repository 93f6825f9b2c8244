package view

import (
	"bufio"
	"encoding/json"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
)

// writeList writes a view List as JSON the way apimachinery's streaming collection encoder
// does ({"kind","apiVersion","metadata","items":[...]}), taking each item's bytes from
// the item itself (cache.Object's WriteJSON writes the bytes encoded once per object
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
	if jw, ok := item.(interface{ WriteJSON(io.Writer) error }); ok {
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
