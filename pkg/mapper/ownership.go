package mapper

import (
	"bytes"
	"fmt"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// ForeignFields returns the fields of live, a target object, that managers other than manager
// own, from its metadata.managedFields (server-side apply's field ownership). Entries of the
// status subresource do not count: the mapper never applies status. Entries of other
// subresources do: an autoscaler that sets replicas through /scale owns .spec.replicas.
//
// It returns an error when an entry's fieldsV1 does not parse.
func ForeignFields(live *unstructured.Unstructured, manager string) (*fieldpath.Set, error) {
	out := &fieldpath.Set{}
	for _, e := range live.GetManagedFields() {
		if e.Manager == manager || e.Subresource == "status" || e.FieldsV1 == nil {
			continue
		}
		if e.FieldsType != "" && e.FieldsType != "FieldsV1" {
			continue
		}
		s := &fieldpath.Set{}
		if err := s.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
			return nil, fmt.Errorf("managedFields of %q (%s): %w", e.Manager, e.Operation, err)
		}
		out = out.Union(s)
	}
	return out, nil
}

// protectedPaths are never dropped from an apply configuration, whoever owns them on the
// target: without them the object would no longer be the mapper's (invariant 2) or the apply
// would not name its object.
var protectedPaths = []fieldpath.Path{
	fieldpath.MakePathOrDie("apiVersion"),
	fieldpath.MakePathOrDie("kind"),
	fieldpath.MakePathOrDie("metadata", "name"),
	fieldpath.MakePathOrDie("metadata", "namespace"),
	fieldpath.MakePathOrDie("metadata", "labels", contract.LocationLabel),
	fieldpath.MakePathOrDie("metadata", "annotations", contract.SourceClusterAnnotation),
	fieldpath.MakePathOrDie("metadata", "annotations", contract.SourceNamespaceAnnotation),
	fieldpath.MakePathOrDie("metadata", "annotations", contract.SourceNameAnnotation),
	fieldpath.MakePathOrDie("metadata", "annotations", contract.SourceUIDAnnotation),
	fieldpath.MakePathOrDie("metadata", "annotations", contract.SourceGenerationAnnotation),
}

// DropFields removes from the apply configuration obj every leaf field of owned (typically
// ForeignFields of the live target object), so that an apply leaves those fields to their
// owners: a target-side autoscaler keeps .spec.replicas, a field someone edited on the target
// keeps the edited value. It resolves server-side apply paths the way the API server does:
// field names in maps, key fields in associative lists (containers by name), values in sets.
// Protected paths (the mapper's own marking, name, kind) and the key fields of list items are
// kept. A removed list item is removed whole. It returns the removed paths, for logs.
func DropFields(obj *unstructured.Unstructured, owned *fieldpath.Set) []string {
	if owned == nil || owned.Empty() {
		return nil
	}
	leaves := owned.Leaves().Difference(fieldpath.NewSet(protectedPaths...))
	var removed []string
	leaves.Iterate(func(p fieldpath.Path) {
		var root interface{} = obj.Object
		if _, ok := removePath(root, p, nil); ok {
			removed = append(removed, p.String())
		}
	})
	return removed
}

// removePath removes the field at p below node and returns the (possibly new) node and
// whether something was removed. itemKey is the key of node when node is an associative list
// item: its key fields are never removed.
func removePath(node interface{}, p fieldpath.Path, itemKey *value.FieldList) (interface{}, bool) {
	if len(p) == 0 {
		return node, false
	}
	pe := p[0]
	if pe.FieldName != nil {
		m, ok := node.(map[string]interface{})
		if !ok {
			return node, false
		}
		name := *pe.FieldName
		child, ok := m[name]
		if !ok {
			return node, false
		}
		if len(p) == 1 {
			if itemKey != nil {
				for _, f := range *itemKey {
					if f.Name == name {
						return node, false
					}
				}
			}
			delete(m, name)
			return m, true
		}
		newChild, removed := removePath(child, p[1:], nil)
		m[name] = newChild
		return m, removed
	}
	l, ok := node.([]interface{})
	if !ok || (pe.Key == nil && pe.Value == nil) {
		// Index elements address atomic lists, which are owned whole; leave them.
		return node, false
	}
	for i, item := range l {
		if !matches(item, pe) {
			continue
		}
		if len(p) == 1 {
			return append(l[:i:i], l[i+1:]...), true
		}
		newItem, removed := removePath(item, p[1:], pe.Key)
		l[i] = newItem
		return l, removed
	}
	return node, false
}

// matches reports whether list item selects the associative-list element pe (a Key or Value
// path element).
func matches(item interface{}, pe fieldpath.PathElement) bool {
	if pe.Value != nil {
		return value.Equals(value.NewValueInterface(item), *pe.Value)
	}
	m, ok := item.(map[string]interface{})
	if !ok {
		return false
	}
	for _, f := range *pe.Key {
		v, ok := m[f.Name]
		if !ok || !value.Equals(value.NewValueInterface(v), f.Value) {
			return false
		}
	}
	return true
}
