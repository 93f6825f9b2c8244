package mapper

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/cluster-mapper/cluster-mapper/pkg/schemacompat"
)

// TestCustomGroup: only groups a CRD may define are compared.
func TestCustomGroup(t *testing.T) {
	for group, want := range map[string]bool{
		"": false, "apps": false, "batch": false, "networking.k8s.io": false, "storage.kubernetes.io": false,
		"example.com": true, "cert-manager.io": true, "mapper.kcp.io": true,
	} {
		if got := customGroup(group); got != want {
			t.Errorf("customGroup(%q) = %v, want %v", group, got, want)
		}
	}
}

// TestKindSchema: the kind's schema is found by kube-apiserver's x-kubernetes-group-version-kind
// mark, as in a CRD's /openapi/v3 document, and the findings become one short message.
func TestKindSchema(t *testing.T) {
	doc := `{"components":{"schemas":{
		"com.example.v1.Gadget":{"type":"object","properties":{"spec":{"type":"object","properties":{"name":{"type":"string","maxLength":8}}}},
			"x-kubernetes-group-version-kind":[{"group":"example.com","kind":"Gadget","version":"v1"}]},
		"com.example.v1.GadgetList":{"type":"object","x-kubernetes-group-version-kind":[{"group":"example.com","kind":"GadgetList","version":"v1"}]},
		"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta":{"type":"object"}}}}`
	var parsed struct {
		Components struct {
			Schemas map[string]*spec.Schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal([]byte(doc), &parsed); err != nil {
		t.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"}
	tgt := kindSchema(parsed.Components.Schemas, gvk)
	if tgt == nil || tgt.Properties["spec"].Properties["name"].MaxLength == nil {
		t.Fatalf("Gadget's schema not found: %+v", tgt)
	}
	if s := kindSchema(parsed.Components.Schemas, gvk.GroupVersion().WithKind("Widget")); s != nil {
		t.Errorf("a Widget schema found: %+v", s)
	}
	src := spec.MapProperty(nil)
	src.Type = spec.StringOrArray{"object"}
	src.AdditionalProperties = nil
	src.Properties = map[string]spec.Schema{"spec": {SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"},
		Properties: map[string]spec.Schema{"name": *spec.StringProperty().WithMaxLength(64)}}}}
	r := schemacompat.Check(src, tgt)
	if msg := describeFindings(r); r.Verdict != schemacompat.Incompatible || msg != ".spec.name: maxLength 8 on the target, 64 in the source" {
		t.Errorf("%s: %q", r.Verdict, msg)
	}
}
