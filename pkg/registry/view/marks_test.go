package view

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"testing"

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
