// Package managedfields reads what a field manager owns of an object's annotations from its
// metadata.managedFields (fieldsV1 format, as kube-apiserver writes it), and trims the entries
// of other managers from informer objects. mapper-controller's placement and dependency
// controllers each write annotations under their own field manager and learn from this which
// of an object's annotations are theirs.
package managedfields

import (
	"encoding/json"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// OwnedAnnotations returns the annotation keys that manager owns on obj, by server-side apply
// or by update (its entries of metadata.managedFields); empty when it owns none or an entry
// does not parse.
func OwnedAnnotations(obj metav1.Object, manager string) sets.Set[string] {
	out := sets.New[string]()
	for _, mf := range obj.GetManagedFields() {
		if mf.Manager != manager || mf.FieldsV1 == nil || mf.Subresource != "" {
			continue
		}
		var fields struct {
			Metadata struct {
				Annotations map[string]json.RawMessage `json:"f:annotations"`
			} `json:"f:metadata"`
		}
		if json.Unmarshal(mf.FieldsV1.Raw, &fields) != nil {
			continue
		}
		for k := range fields.Metadata.Annotations {
			if key, ok := strings.CutPrefix(k, "f:"); ok {
				out.Insert(key)
			}
		}
	}
	return out
}

// Keep returns an informer transform (cache.TransformFunc) that keeps, of an object's
// metadata.managedFields, only the entries of managers: mapper-controller reads no other. It
// saves the informers the other managers' field sets (a ConfigMap's data keys, a Deployment's
// whole spec), and does not fail: any other value is returned as it is.
//
// Objects of control.mapper.kcp.io keep all their managedFields: mapper-controller updates
// them (Placement finalizers, StatusSummaries) from their informer copies, and an update of
// the main resource carrying a non-empty partial list replaces the server's, which would drop
// the other managers' entries. (Status updates are safe either way: kube-apiserver ignores
// managedFields in a subresource's request.) Metadata informers' PartialObjectMetadata are
// never written back, so they are trimmed whatever their group.
func Keep(managers ...string) toolscache.TransformFunc {
	other := func(manager string) bool { return !slices.Contains(managers, manager) }
	return func(obj interface{}) (interface{}, error) {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			m.ManagedFields = slices.DeleteFunc(m.ManagedFields, func(e metav1.ManagedFieldsEntry) bool { return other(e.Manager) })
			if len(m.ManagedFields) == 0 {
				m.ManagedFields = nil
			}
			return m, nil
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || u.GroupVersionKind().Group == controlv1alpha1.GroupName {
			return obj, nil
		}
		meta, ok := u.Object["metadata"].(map[string]interface{})
		if !ok {
			return obj, nil
		}
		entries, ok := meta["managedFields"].([]interface{})
		if !ok {
			return obj, nil
		}
		kept := entries[:0]
		for _, e := range entries {
			if m, ok := e.(map[string]interface{}); ok {
				if name, _ := m["manager"].(string); !other(name) {
					kept = append(kept, e)
				}
			}
		}
		if len(kept) == 0 {
			delete(meta, "managedFields")
		} else {
			meta["managedFields"] = kept
		}
		return u, nil
	}
}
