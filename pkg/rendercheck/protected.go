package rendercheck

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// protectedFields are the fields a rendering may not change, as paths of field names: what
// identifies the object on the source and on a target (a rendered name or namespace would be
// another object there), its version, its lifecycle (ownerReferences, finalizers and the
// deletion fields drive the deletion protocol; a rendered deletionTimestamp would make a mapper
// delete its copy), its managedFields, and its status (which a target reports, not a rendering).
var protectedFields = [][]string{
	{"apiVersion"}, {"kind"}, {"status"},
	{"metadata", "name"}, {"metadata", "namespace"}, {"metadata", "uid"},
	{"metadata", "resourceVersion"}, {"metadata", "generation"}, {"metadata", "creationTimestamp"},
	{"metadata", "deletionTimestamp"}, {"metadata", "deletionGracePeriodSeconds"},
	{"metadata", "ownerReferences"}, {"metadata", "finalizers"}, {"metadata", "managedFields"},
}

// markMaps are the metadata maps whose mark keys (IsMark) a rendering may not change.
var markMaps = []string{"labels", "annotations"}

// specDiffPrefix is the prefix of the per-location patch annotations (contract.SpecDiffAnnotationPrefix;
// not imported, so that the contract package may use this one).
const specDiffPrefix = "spec-diff.kcp.io/"

// IsMark reports whether a label or annotation key is one of the system's marks: a key whose
// prefix (the part before the first "/") is kcp.io or ends with .kcp.io, compared without
// regard to case (docs/design.md, "Names": kcp.io/cluster, kcp.io/assigned-locations,
// status.kcp.io/<location>, spec-diff.kcp.io/<location>, outcome.kcp.io/<location>, ...).
// A key without "/" is never a mark.
func IsMark(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	const domain = "kcp.io"
	if len(prefix) < len(domain) || !strings.EqualFold(prefix[len(prefix)-len(domain):], domain) {
		return false
	}
	return len(prefix) == len(domain) || prefix[len(prefix)-len(domain)-1] == '.'
}

// Changed compares after, a rendering, with before, its input, and returns the JSON pointer
// (RFC 6901, e.g. "/metadata/labels/kcp.io~1location") of the first protected field whose
// value differs, and whether there is one. Protected are apiVersion, kind, status,
// metadata.name, namespace, uid, resourceVersion, generation, creationTimestamp,
// deletionTimestamp, deletionGracePeriodSeconds, ownerReferences, finalizers and
// managedFields, and every label and annotation whose key is a mark (IsMark), added, removed
// or changed. The spec-diff.kcp.io/ annotations are the exception: they are a rendering's
// input, which every rendering consumes (the view never shows them).
//
// Values compare as JSON (an integer 1 equals 1.0, as the decoders of a status record and of a
// patched object differ there); a field that is null counts as absent. Neither object is
// changed.
func Changed(before, after *unstructured.Unstructured) (string, bool) {
	for _, p := range protectedFields {
		b, bok, _ := unstructured.NestedFieldNoCopy(before.Object, p...)
		a, aok, _ := unstructured.NestedFieldNoCopy(after.Object, p...)
		bok, aok = bok && b != nil, aok && a != nil
		if bok != aok || (bok && !sameScalar(a, b)) {
			return pointer(p...), true
		}
	}
	for _, m := range markMaps {
		bm := stringMap(before, m)
		am := stringMap(after, m)
		for k, bv := range bm {
			if !IsMark(k) || (m == "annotations" && strings.HasPrefix(k, specDiffPrefix)) {
				continue
			}
			if av, ok := am[k]; !ok || !sameScalar(av, bv) {
				return pointer("metadata", m, k), true
			}
		}
		for k := range am {
			if _, ok := bm[k]; !ok && IsMark(k) && !(m == "annotations" && strings.HasPrefix(k, specDiffPrefix)) {
				return pointer("metadata", m, k), true
			}
		}
	}
	return "", false
}

// stringMap returns u's metadata.<field> in place, nil when absent or not a map.
func stringMap(u *unstructured.Unstructured, field string) map[string]interface{} {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", field)
	m, _ := v.(map[string]interface{})
	return m
}

// sameScalar compares two JSON values: strings and integers directly (most protected fields
// and every label and annotation are one; no allocation), anything else as JSON
// (structured-merge-diff's value.Equals: 1 equals 1.0).
func sameScalar(a, b interface{}) bool {
	switch a := a.(type) {
	case string:
		bs, ok := b.(string)
		return ok && a == bs
	case int64:
		if bi, ok := b.(int64); ok {
			return a == bi
		}
	}
	return value.Equals(value.NewValueInterface(a), value.NewValueInterface(b))
}

// pointer returns the JSON pointer of the path of field names (RFC 6901: "~" is written
// "~0" and "/" "~1").
func pointer(fields ...string) string {
	var b strings.Builder
	for _, f := range fields {
		b.WriteByte('/')
		b.WriteString(escaper.Replace(f))
	}
	return b.String()
}

var (
	escaper   = strings.NewReplacer("~", "~0", "/", "~1")
	unescaper = strings.NewReplacer("~1", "/", "~0", "~")
)

// ModifiesProtected reports whether an operation that changes the value at JSON pointer ptr
// (an RFC 6902 add, remove, replace, the path of a copy, the path or the from of a move)
// could change a protected field (Changed), and returns that field's pointer (or, for an
// ancestor, the ancestor's, "" for the whole object). It could when ptr is a protected field,
// is below one (/metadata/finalizers/0), or is an ancestor of one: the whole object (""),
// /metadata, /metadata/labels and /metadata/annotations (a replaced map would drop or forge
// the marks in it), whatever their value.
//
// ptr is read as gopkg.in/evanphx/json-patch.v4 reads it (the patch library of the views):
// split at "/", the first part dropped, "~1" then "~0" decoded in each part. So
// "/metadata/labels/kcp.io~1location" is the label kcp.io/location.
func ModifiesProtected(ptr string) (string, bool) {
	parts := strings.Split(ptr, "/")[1:]
	for i, p := range parts {
		parts[i] = unescaper.Replace(p)
	}
	switch {
	case len(parts) == 0:
		return "", true
	case parts[0] != "metadata":
		for _, f := range protectedFields {
			if len(f) == 1 && f[0] == parts[0] {
				return pointer(f...), true
			}
		}
		return "", false
	case len(parts) == 1:
		return pointer(parts[0]), true
	}
	for _, f := range protectedFields {
		if len(f) == 2 && f[1] == parts[1] {
			return pointer(f...), true
		}
	}
	for _, m := range markMaps {
		if parts[1] != m {
			continue
		}
		if len(parts) == 2 || IsMark(parts[2]) {
			return pointer(parts[:min(len(parts), 3)]...), true
		}
	}
	return "", false
}
