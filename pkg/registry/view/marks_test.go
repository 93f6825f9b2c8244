package view

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// TestMarkChangeOf: the policy of writes on the object itself through a view accepts adding or
// removing the location's own finalizer, with or without a resourceVersion, managedFields or
// another generation, and refuses any other change, naming it.
func TestMarkChangeOf(t *testing.T) {
	east, west := contract.LocationFinalizer("east"), contract.LocationFinalizer("west")
	view := cm("ns", "a", 5, "x", "east")
	view.SetFinalizers([]string{"example.com/other"})
	with := func(mutate func(u *unstructured.Unstructured)) *unstructured.Unstructured {
		c := view.DeepCopy()
		mutate(c)
		return c
	}
	for _, c := range []struct {
		name    string
		new     *unstructured.Unstructured
		want    int
		refused bool
	}{
		{"add", with(func(u *unstructured.Unstructured) {
			u.SetFinalizers([]string{"example.com/other", east})
			u.SetResourceVersion("9")
		}), 1, false},
		{"no change", with(func(u *unstructured.Unstructured) { u.SetGeneration(3) }), 0, false},
		{"another location's", with(func(u *unstructured.Unstructured) { u.SetFinalizers([]string{"example.com/other", west}) }), 0, true},
		{"another controller's removed", with(func(u *unstructured.Unstructured) { u.SetFinalizers([]string{east}) }), 0, true},
		{"data", with(func(u *unstructured.Unstructured) { u.Object["data"] = map[string]interface{}{"k": "changed"} }), 0, true},
		{"a label", with(func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"a": "b"}) }), 0, true},
	} {
		got, err := markChangeOf(view, c.new, "east")
		if (err != nil) != c.refused || got.finalizer != c.want {
			t.Errorf("%s: change %+v, err %v; want %d, refused %v", c.name, got, err, c.want, c.refused)
		}
	}
	owned := view.DeepCopy()
	owned.SetFinalizers([]string{east, "example.com/other"})
	removed := owned.DeepCopy()
	removed.SetFinalizers([]string{"example.com/other"})
	if got, err := markChangeOf(owned, removed, "east"); err != nil || got.finalizer != -1 {
		t.Errorf("remove: %+v, %v", got, err)
	}
	src := owned.DeepCopy()
	src.SetFinalizers([]string{west, east, "example.com/other"})
	if got := withMarkChange(src, "east", markChange{finalizer: -1}).GetFinalizers(); len(got) != 2 || got[0] != west {
		t.Errorf("withMarkChange remove: %v (the other finalizers stay, in order)", got)
	}
}

// TestMarkChangeOfOutcomeRecords: a write through a view may set, change or remove the
// location's own outcome record (alone or with its finalizer), never another location's; a
// record that is not one, or is larger than 4 KiB, is refused (checkOutcomeRecord).
func TestMarkChangeOfOutcomeRecords(t *testing.T) {
	key, other := contract.OutcomeAnnotation("east"), contract.OutcomeAnnotation("west")
	record := `{"reason":"Conflict","message":"taken","time":"2026-11-28T16:00:00Z"}`
	view := cm("ns", "a", 5, "x", "east")
	with := func(base *unstructured.Unstructured, ann map[string]string) *unstructured.Unstructured {
		c := base.DeepCopy()
		c.SetAnnotations(ann)
		return c
	}
	base := view.GetAnnotations()
	plus := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for a, b := range base {
			m[a] = b
		}
		return m
	}
	got, err := markChangeOf(view, with(view, plus(key, record)), "east")
	if err != nil || got.outcome != 1 || got.outcomeRecord != record {
		t.Fatalf("set: %+v, %v", got, err)
	}
	withRecord := with(view, plus(key, record))
	if got, err := markChangeOf(withRecord, view, "east"); err != nil || got.outcome != -1 || got.finalizer != 0 {
		t.Fatalf("remove: %+v, %v", got, err)
	}
	if got, err := markChangeOf(withRecord, withRecord, "east"); err != nil || got.changes() {
		t.Fatalf("unchanged: %+v, %v", got, err)
	}
	if _, err := markChangeOf(view, with(view, plus(other, record)), "east"); err == nil {
		t.Fatal("another location's outcome record was accepted")
	}
	if _, err := markChangeOf(view, with(view, plus("example.com/x", "y")), "east"); err == nil {
		t.Fatal("another annotation was accepted")
	}
	gr := schema.GroupResource{Resource: "configmaps"}
	if err := checkOutcomeRecord(gr, "a", "east", got); err != nil {
		t.Fatalf("a valid record: %v", err)
	}
	if err := checkOutcomeRecord(gr, "a", "east", markChange{outcome: 1, outcomeRecord: "{}"}); !apierrors.IsBadRequest(err) {
		t.Fatalf("a record without reason: %v, want 400", err)
	}
	big := `{"reason":"Rejected","message":"` + strings.Repeat("x", contract.MaxOutcomeRecordBytes) + `"}`
	if err := checkOutcomeRecord(gr, "a", "east", markChange{outcome: 1, outcomeRecord: big}); !apierrors.IsRequestEntityTooLargeError(err) {
		t.Fatalf("a record over 4 KiB: %v, want 413", err)
	}
	src := with(view, map[string]string{other: record, key: record})
	if ann := withMarkChange(src, "east", markChange{outcome: -1}).GetAnnotations(); len(ann) != 1 || ann[other] != record {
		t.Fatalf("withMarkChange remove: %v (the other location's record stays)", ann)
	}
}
