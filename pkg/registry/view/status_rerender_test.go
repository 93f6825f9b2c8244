package view

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/registry/rest"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
)

// TestWriteAtReRenderedResourceVersion: a Customization that arrives after the object shows
// east's view of it at the re-rendering's resourceVersion (9), newer than the source object's
// (7). A status write, or east's finalizer added through the view (the deletion protocol's first
// step for every new copy: the same precondition, marks_storage.go), carrying that
// resourceVersion is accepted, as kube-apiserver accepts
// the resourceVersion it served; a resourceVersion east never saw is a 409. Fails without
// preconditionHolds' re-rendering rule: both writes at 9 were a 409, and the mapper could copy
// no object a Customization rendered.
func TestWriteAtReRenderedResourceVersion(t *testing.T) {
	w := widget("w", 7, []string{"east"}, map[string]string{contract.StatusPolicyAnnotation: contract.StatusPolicyReflect}, nil)
	src := newStatusSource(t, w)
	store := cache.NewResourceStore(widgetsGVR, widgetsInfo.GVK(), true, cache.StoreOptions{DefaultCluster: "root"})
	t.Cleanup(store.Close)
	if err := store.Replace([]interface{}{src.get(t, "w")}, "7"); err != nil {
		t.Fatal(err)
	}
	region := &controlv1alpha1.Customization{
		ObjectMeta: metav1.ObjectMeta{Name: "region", Namespace: "team-a", Generation: 1},
		Spec: controlv1alpha1.CustomizationSpec{
			Resources: []controlv1alpha1.ResourceRule{{APIGroups: []string{"example.com"}, APIVersions: []string{"v1"}, Resources: []string{"widgets"}}},
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "add", path: "/spec/region", value: "eu"}]`}}},
		},
	}
	snapshot, errs := customization.NewCompiler(customization.Options{PlainCluster: "root"}).Snapshot(1, []*controlv1alpha1.Customization{region},
		[]customization.Location{{Name: "east"}})
	if len(errs) > 0 {
		t.Fatalf("compile errors: %v", errs)
	}
	store.SetRules(snapshot, 9)
	st := &statusStorage{info: widgetsInfo, store: store, source: src, clusters: clusters{plain: "root"}, freshness: freshness{gvr: widgetsGVR, store: store, source: src}}
	seen, err := st.Get(viewCtx("east", "team-a"), "w", &metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rv := asUnstructured(t, seen).GetResourceVersion(); rv != "9" {
		t.Fatalf("east's view shows w at %s after the re-rendering at 9", rv)
	}

	stale := asUnstructured(t, seen).DeepCopy()
	stale.SetResourceVersion("8") // never shown to east
	stale.Object["status"] = map[string]interface{}{"phase": "Ready"}
	_, _, err = st.Update(viewCtx("east", "team-a"), "w", rest.DefaultUpdatedObjectInfo(stale), nil, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	expectCode(t, "a status write at a resourceVersion east never saw", err, 409)

	write := asUnstructured(t, seen).DeepCopy()
	write.Object["status"] = map[string]interface{}{"phase": "Ready"}
	if _, _, err := st.Update(viewCtx("east", "team-a"), "w", rest.DefaultUpdatedObjectInfo(write), nil, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status write at east's re-rendered resourceVersion 9: %v", err)
	}
}
