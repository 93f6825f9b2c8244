package specdiff

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

func deployment(annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]interface{}{"name": "web", "namespace": "apps"},
		"spec":     map[string]interface{}{"replicas": int64(10)},
	}}
	u.SetAnnotations(annotations)
	return u
}

// TestApply: the location's patch is applied, every spec-diff.kcp.io/ annotation is dropped,
// other annotations stay, and the input is not changed.
func TestApply(t *testing.T) {
	in := deployment(map[string]string{
		contract.SpecDiffAnnotation("east"): `[{"op":"replace","path":"/spec/replicas","value":4}]`,
		contract.SpecDiffAnnotation("west"): `[{"op":"replace","path":"/spec/replicas","value":6}]`,
		"example.com/kept":                  "yes",
	})
	before := in.DeepCopy()
	out, err := Apply(in, "east", in.GetAnnotations()[contract.SpecDiffAnnotation("east")])
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(out.Object, "spec", "replicas"); r != 4 {
		t.Errorf("replicas = %d, want 4", r)
	}
	if got, want := out.GetAnnotations(), map[string]string{"example.com/kept": "yes"}; !reflect.DeepEqual(got, want) {
		t.Errorf("annotations = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(in.Object, before.Object) {
		t.Error("Apply changed its input")
	}

	// No patch: the annotations of other locations still go, the input stays.
	out, err = Apply(in, "north", "")
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(out.Object, "spec", "replicas"); r != 10 || len(out.GetAnnotations()) != 1 {
		t.Errorf("without a patch: replicas %d, annotations %v; want 10 and only the kept one", r, out.GetAnnotations())
	}
	if !reflect.DeepEqual(in.Object, before.Object) {
		t.Error("Apply changed its input")
	}
	plain := deployment(nil)
	if out, _ := Apply(plain, "east", ""); out != plain {
		t.Error("an object without patch annotations was copied")
	}
}

// TestApplyErrors: a patch that cannot be applied is an *Error naming the annotation, with a
// reason a person understands; identity, version and status are protected.
func TestApplyErrors(t *testing.T) {
	cases := map[string]struct{ patch, want string }{
		"not JSON":           {`[{"op":`, "not an RFC 6902 JSON patch"},
		"not a patch":        {`{"spec":{"replicas":4}}`, "not an RFC 6902 JSON patch"},
		"failing test":       {`[{"op":"test","path":"/spec/replicas","value":3}]`, "testing value /spec/replicas failed"},
		"missing path":       {`[{"op":"remove","path":"/spec/template"}]`, "remove"},
		"rename":             {`[{"op":"replace","path":"/metadata/name","value":"other"}]`, `changes "/metadata/name"`},
		"move the namespace": {`[{"op":"move","from":"/metadata/namespace","path":"/spec/ns"}]`, `changes "/metadata/namespace"`},
		"status":             {`[{"op":"add","path":"/status/replicas","value":1}]`, `changes "/status/replicas"`},
		"whole object":       {`[{"op":"replace","path":"","value":{}}]`, "whole object"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Apply(deployment(nil), "east", c.patch)
			var e *Error
			if !errors.As(err, &e) || e.Location != "east" {
				t.Fatalf("err = %v, want an *Error for east", err)
			}
			if !strings.Contains(err.Error(), contract.SpecDiffAnnotation("east")) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %q, want it to name the annotation and say %q", err, c.want)
			}
		})
	}
}

// TestChangedProtected: an unchanged object has no changed protected path; a changed name, a
// removed uid or a changed status are found, and other changes are not.
func TestChangedProtected(t *testing.T) {
	before := deployment(nil)
	before.SetUID("u1")
	before.Object["status"] = map[string]interface{}{"replicas": int64(1)}
	if p, changed := ChangedProtected(before, before.DeepCopy()); changed {
		t.Fatalf("unchanged object: changed %s", p)
	}
	for _, tc := range []struct {
		want   string
		change func(u *unstructured.Unstructured)
	}{
		{"/metadata/name", func(u *unstructured.Unstructured) { u.SetName("other") }},
		{"/metadata/uid", func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "metadata", "uid") }},
		{"/status", func(u *unstructured.Unstructured) { u.Object["status"] = map[string]interface{}{"replicas": int64(2)} }},
		{"", func(u *unstructured.Unstructured) { u.Object["spec"] = map[string]interface{}{"replicas": int64(3)} }},
	} {
		after := before.DeepCopy()
		tc.change(after)
		p, changed := ChangedProtected(before, after)
		if p != tc.want || changed != (tc.want != "") {
			t.Errorf("want %q, got %q (changed %v)", tc.want, p, changed)
		}
	}
}
