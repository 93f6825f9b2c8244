package mapper

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestAppliedCopies: an apply is skipped only when it would send what the last apply sent onto
// a copy still at the resourceVersion that apply answered with.
func TestAppliedCopies(t *testing.T) {
	key := itemKey{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "ns", Name: "a"}
	desired := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]interface{}{"name": "a", "namespace": "ns"},
		"data": map[string]interface{}{"k": "v", "z": "y"},
	}}
	config, ok := configHash(desired)
	if !ok {
		t.Fatal("configHash failed")
	}
	if again, _ := configHash(desired.DeepCopy()); again != config {
		t.Fatal("configHash is not stable")
	}
	changed := desired.DeepCopy()
	changed.Object["data"] = map[string]interface{}{"k": "other", "z": "y"}
	other, _ := configHash(changed)
	if other == config {
		t.Fatal("configHash does not see a changed value")
	}
	copyAt := func(rv string) *unstructured.Unstructured {
		u := desired.DeepCopy()
		u.SetResourceVersion(rv)
		return u
	}

	a := newAppliedCopies()
	if a.unchangedSince(key, config, copyAt("5")) {
		t.Error("unchanged before any apply")
	}
	a.record(key, config, "5")
	for _, c := range []struct {
		name   string
		config uint64
		live   *unstructured.Unstructured
		want   bool
	}{
		{"same configuration, copy untouched", config, copyAt("5"), true},
		{"another configuration", other, copyAt("5"), false},
		{"the copy changed since", config, copyAt("6"), false},
		{"no copy", config, nil, false},
	} {
		if got := a.unchangedSince(key, c.config, c.live); got != c.want {
			t.Errorf("%s: unchangedSince = %v, want %v", c.name, got, c.want)
		}
	}
	a.forget(key)
	if a.unchangedSince(key, config, copyAt("5")) {
		t.Error("unchanged after forget")
	}

	// objectStates forgets an object's last apply when its sync fails or it is gone.
	s := newObjectStates(locationMetrics{location: "applied-east"})
	for _, o := range []outcome{outcomeError, outcomeNone} {
		s.applied.record(key, config, "5")
		s.set(key, o)
		if s.applied.unchangedSince(key, config, copyAt("5")) {
			t.Errorf("the last apply is remembered after outcome %d", o)
		}
	}
}
