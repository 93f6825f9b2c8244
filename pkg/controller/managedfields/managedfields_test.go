package managedfields

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// object returns a ConfigMap with the managedFields entries kube-apiserver writes for an
// apply by "placer" of applied keys, an update by "follower" of updated keys and an update by
// kubectl of the key "note".
func object(applied, updated []string) *unstructured.Unstructured {
	fields := func(keys ...string) *metav1.FieldsV1 {
		raw := `{"f:metadata":{"f:annotations":{`
		for i, k := range keys {
			if i > 0 {
				raw += ","
			}
			raw += `"f:` + k + `":{}`
		}
		return &metav1.FieldsV1{Raw: []byte(raw + `}}}`)}
	}
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "placer", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: fields(applied...)},
		{Manager: "follower", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: fields(updated...)},
		{Manager: "kubectl-annotate", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: fields("note")},
		{Manager: "placer", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsType: "FieldsV1", FieldsV1: fields("by-status")},
	})
	return u
}

func TestOwnedAnnotations(t *testing.T) {
	u := object([]string{"a", "b"}, []string{"c"})
	if got := OwnedAnnotations(u, "placer"); got.Len() != 2 || !got.HasAll("a", "b") {
		t.Errorf("placer owns %v, want a and b (its status entry does not count)", got.UnsortedList())
	}
	if got := OwnedAnnotations(u, "follower"); got.Len() != 1 || !got.Has("c") {
		t.Errorf("follower (by update) owns %v, want c", got.UnsortedList())
	}
	if got := OwnedAnnotations(u, "nobody"); got.Len() != 0 {
		t.Errorf("a manager without entries owns %v", got.UnsortedList())
	}
}

func TestKeep(t *testing.T) {
	trim := Keep("placer", "follower")
	out, err := trim(object([]string{"a"}, []string{"c"}))
	if err != nil {
		t.Fatal(err)
	}
	mf := out.(*unstructured.Unstructured).GetManagedFields()
	if len(mf) != 3 || mf[0].Manager != "placer" || mf[1].Manager != "follower" || mf[2].Manager != "placer" {
		t.Fatalf("kept %+v, want the placer's and follower's entries only", mf)
	}
	if got := OwnedAnnotations(out.(*unstructured.Unstructured), "placer"); !got.Has("a") {
		t.Errorf("after trimming, owned annotations %v", got.UnsortedList())
	}
	other := object(nil, nil)
	other.SetManagedFields(other.GetManagedFields()[2:3])
	out, _ = trim(other)
	if _, found := out.(*unstructured.Unstructured).Object["metadata"].(map[string]interface{})["managedFields"]; found {
		t.Error("an object without the managers' entries kept managedFields")
	}
	meta := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ManagedFields: object([]string{"a"}, nil).GetManagedFields()}}
	out, _ = trim(meta)
	if n := len(out.(*metav1.PartialObjectMetadata).ManagedFields); n != 3 {
		t.Errorf("metadata kept %d entries, want 3", n)
	}
	pl := object(nil, nil)
	pl.SetAPIVersion("control.mapper.kcp.io/v1alpha1")
	pl.SetKind("Placement")
	out, _ = trim(pl)
	if n := len(out.(*unstructured.Unstructured).GetManagedFields()); n != 4 {
		t.Errorf("a Placement, which the controller updates whole, kept %d of 4 managedFields entries", n)
	}
	if out, _ := trim("not an object"); out != "not an object" {
		t.Error("a non-object was changed")
	}
}
