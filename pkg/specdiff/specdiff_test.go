package specdiff

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/rendercheck"
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
		"rename":             {`[{"op":"replace","path":"/metadata/name","value":"other"}]`, `changes /metadata/name`},
		"move the namespace": {`[{"op":"move","from":"/metadata/namespace","path":"/spec/ns"}]`, `changes /metadata/namespace`},
		"status":             {`[{"op":"add","path":"/status/replicas","value":1}]`, `changes /status`},
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

// protectedTargets are JSON pointers no spec-diff operation may change: every protected field,
// every ancestor of one, and marks written with RFC 6901 escapes.
var protectedTargets = []string{
	"", "/metadata", "/metadata/annotations", "/metadata/labels",
	"/apiVersion", "/kind", "/status", "/status/replicas",
	"/metadata/name", "/metadata/namespace", "/metadata/uid", "/metadata/resourceVersion",
	"/metadata/generation", "/metadata/creationTimestamp", "/metadata/deletionTimestamp",
	"/metadata/ownerReferences", "/metadata/ownerReferences/0", "/metadata/finalizers", "/metadata/finalizers/-",
	"/metadata/managedFields",
	"/metadata/labels/kcp.io~1location", "/metadata/labels/Kcp.IO~1location", "/metadata/labels/team.kcp.io~1owner",
	"/metadata/annotations/kcp.io~1cluster", "/metadata/annotations/kcp.io~1assigned-locations",
	"/metadata/annotations/status.kcp.io~1west", "/metadata/annotations/spec-diff.kcp.io~1west",
	"/metadata/annotations/outcome.kcp.io~1east",
}

// TestRefusedPatches (docs/customization.md, "What a rendering may not change"): add, replace, remove, copy onto and move onto
// or away from a protected pointer is refused before the patch runs, with a reason naming the
// protected field; so are the patches that moved a tenant's object into another namespace.
// Reading a protected field (test, the from of a copy) and changing other labels and
// annotations are allowed.
func TestRefusedPatches(t *testing.T) {
	obj := deployment(map[string]string{"kcp.io/cluster": "default", "example.com/note": "x"})
	obj.SetUID("u-1")
	obj.SetLabels(map[string]string{"app": "web", "kcp.io/location": "east"})
	obj.SetFinalizers([]string{"locations.mapper.kcp.io/east"})
	value := `{"name":"victim","namespace":"tenant-b"}`
	for _, target := range protectedTargets {
		for _, op := range map[string]string{
			"add":       `{"op":"add","path":%q,"value":` + value + `}`,
			"replace":   `{"op":"replace","path":%q,"value":` + value + `}`,
			"remove":    `{"op":"remove","path":%q}`,
			"copy onto": `{"op":"copy","from":"/spec","path":%q}`,
			"move onto": `{"op":"move","from":"/spec","path":%q}`,
			"move away": `{"op":"move","from":%q,"path":"/spec/moved"}`,
		} {
			patch := "[" + fmt.Sprintf(op, target) + "]"
			_, err := Apply(obj, "east", patch)
			var refusal *rendercheck.Refusal
			if !errors.As(err, &refusal) || refusal.Reason != rendercheck.ReasonProtectedFieldChanged {
				t.Errorf("%s: err = %v, want a refusal", patch, err)
				continue
			}
			if !strings.Contains(err.Error(), contract.SpecDiffAnnotation("east")) {
				t.Errorf("%s: %q does not name the annotation", patch, err)
			}
		}
	}
	for _, patch := range []string{
		`[{"op":"replace","path":"/metadata","value":{"name":"victim","namespace":"tenant-b"}}]`,
		`[{"op":"add","path":"/metadata","value":{"name":"victim","namespace":"tenant-b"}}]`,
		`[{"op":"add","path":"/spec/m","value":{"name":"victim","namespace":"tenant-b"}},{"op":"move","from":"/spec/m","path":"/metadata"}]`,
		`[{"op":"replace","path":"/metadata/annotations","value":{}}]`,
		`[{"op":"add","path":"/metadata/labels/kcp.io~1location","value":"west"}]`,
	} {
		if _, err := Apply(obj, "east", patch); !errors.As(err, new(*rendercheck.Refusal)) {
			t.Errorf("%s: err = %v, want a refusal", patch, err)
		} else {
			t.Logf("%s: %v", patch, err)
		}
	}
	for _, patch := range []string{
		`[{"op":"test","path":"/metadata/name","value":"web"}]`,
		`[{"op":"test","path":"/metadata/labels/kcp.io~1location","value":"east"}]`,
		`[{"op":"copy","from":"/metadata/name","path":"/spec/name"}]`,
		`[{"op":"copy","from":"/metadata/labels","path":"/spec/labels"}]`,
		`[{"op":"add","path":"/metadata/labels/tier","value":"edge"}]`,
		`[{"op":"replace","path":"/metadata/labels/app","value":"api"}]`,
		`[{"op":"remove","path":"/metadata/annotations/example.com~1note"}]`,
		`[{"op":"add","path":"/metadata/annotations/example.com~1kcp.io","value":"not a mark"}]`,
	} {
		if _, err := Apply(obj, "east", patch); err != nil {
			t.Errorf("%s: %v, want it applied", patch, err)
		}
	}
}

// TestPatchedObjectIsChecked: the patched object is compared with its input as well, so even
// operations the decoder let through (here: applied directly) cannot change a protected field.
func TestPatchedObjectIsChecked(t *testing.T) {
	obj := deployment(map[string]string{"kcp.io/cluster": "default"})
	for patch, want := range map[string]string{
		`[{"op":"replace","path":"/metadata","value":{"name":"web","namespace":"apps"}}]`:   "/metadata/annotations/kcp.io~1cluster",
		`[{"op":"add","path":"/metadata/annotations/kcp.io~1cluster","value":"other"}]`:     "/metadata/annotations/kcp.io~1cluster",
		`[{"op":"add","path":"/metadata/namespace","value":"tenant-b"}]`:                    "/metadata/namespace",
		`[{"op":"replace","path":"/spec/replicas","value":1}]`:                              "",
		`[{"op":"add","path":"/metadata/annotations/spec-diff.kcp.io~1east","value":"[]"}]`: "",
	} {
		p, err := jsonpatch.DecodePatch([]byte(patch))
		if err != nil {
			t.Fatal(err)
		}
		_, err = applyDecoded(obj, p)
		var refusal *rendercheck.Refusal
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v, want it applied", patch, err)
		case want != "" && (!errors.As(err, &refusal) || refusal.Path != want):
			t.Errorf("%s: err = %v, want a refusal of %s", patch, err, want)
		}
	}
}
