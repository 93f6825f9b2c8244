package customization

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/rendercheck"
)

// guarded is deployment() with everything a rendering may not change: an owner, a finalizer, a
// creation time, a mark label and a status (as a view shows a location's status record: its
// numbers are float64, as encoding/json decodes them).
func guarded() *unstructured.Unstructured {
	u := deployment()
	meta := u.Object["metadata"].(map[string]interface{})
	meta["creationTimestamp"] = "2025-01-01T00:00:00Z"
	meta["generation"] = int64(3)
	meta["ownerReferences"] = []interface{}{map[string]interface{}{"apiVersion": "v1", "kind": "Secret", "name": "owner", "uid": "u-0"}}
	meta["finalizers"] = []interface{}{"locations.mapper.kcp.io/east"}
	meta["labels"].(map[string]interface{})["team.kcp.io/owner"] = "a"
	u.Object["status"] = map[string]interface{}{"replicas": float64(2), "observedGeneration": float64(3)}
	return u
}

// TestMutationsCannotChangeIdentityOrMarks (docs/customization.md, "What a rendering may not change"): a JSONPatch or
// ApplyConfiguration mutation that changes the object's identity, version, lifecycle, status or
// a kcp.io mark, or replaces /metadata or an ancestor of a protected field, fails the rendering
// with ReasonProtectedFieldChanged naming the mutation and the field, alone and after a
// harmless mutation; so does the object's own spec-diff.kcp.io/ patch (naming no
// Customization). Other labels and annotations may be changed, and a status whose numbers
// only change type is the same status.
func TestMutationsCannotChangeIdentityOrMarks(t *testing.T) {
	refused := map[string]struct {
		mutation admissionregistrationv1.Mutation
		path     string
	}{
		"replace /metadata": {jsonPatch(`[JSONPatch{op: "replace", path: "/metadata", value: Object.metadata{name: "victim", namespace: "tenant-b"}}]`), "/metadata/name"},
		"replace /metadata keeping the name": {jsonPatch(`[JSONPatch{op: "replace", path: "/metadata",
		  value: Object.metadata{name: object.metadata.name, namespace: object.metadata.namespace, uid: object.metadata.uid}}]`), ""},
		"add /metadata": {jsonPatch(`[JSONPatch{op: "add", path: "/metadata", value: Object.metadata{name: "victim", namespace: "tenant-b"}}]`), "/metadata/name"},
		"move onto /metadata": {jsonPatch(`[JSONPatch{op: "add", path: "/spec/m", value: Object.metadata{name: "victim", namespace: "tenant-b"}},
		  JSONPatch{op: "move", from: "/spec/m", path: "/metadata"}]`), "/metadata/name"},
		"copy onto /metadata/labels":   {jsonPatch(`[JSONPatch{op: "copy", from: "/spec/selector/matchLabels", path: "/metadata/labels"}]`), "/metadata/labels/team.kcp.io~1owner"},
		"remove /metadata/annotations": {jsonPatch(`[JSONPatch{op: "remove", path: "/metadata/annotations"}]`), "/metadata/annotations/kcp.io~1cluster"},
		"replace /metadata/labels":     {jsonPatch(`[JSONPatch{op: "replace", path: "/metadata/labels", value: {"app": "web"}}]`), "/metadata/labels/team.kcp.io~1owner"},
		"move the namespace away":      {jsonPatch(`[JSONPatch{op: "move", from: "/metadata/namespace", path: "/spec/ns"}]`), "/metadata/namespace"},
		"rename":                       {jsonPatch(`[JSONPatch{op: "replace", path: "/metadata/name", value: "victim"}]`), "/metadata/name"},
		"remove the uid":               {jsonPatch(`[JSONPatch{op: "remove", path: "/metadata/uid"}]`), "/metadata/uid"},
		"set the resourceVersion":      {jsonPatch(`[JSONPatch{op: "replace", path: "/metadata/resourceVersion", value: "1"}]`), "/metadata/resourceVersion"},
		"set the generation":           {jsonPatch(`[JSONPatch{op: "replace", path: "/metadata/generation", value: 9}]`), "/metadata/generation"},
		"set the creationTimestamp":    {jsonPatch(`[JSONPatch{op: "replace", path: "/metadata/creationTimestamp", value: "2020-01-01T00:00:00Z"}]`), "/metadata/creationTimestamp"},
		"set a deletionTimestamp":      {jsonPatch(`[JSONPatch{op: "add", path: "/metadata/deletionTimestamp", value: "2025-01-02T00:00:00Z"}]`), "/metadata/deletionTimestamp"},
		"drop the ownerReferences":     {jsonPatch(`[JSONPatch{op: "remove", path: "/metadata/ownerReferences"}]`), "/metadata/ownerReferences"},
		"add a finalizer":              {jsonPatch(`[JSONPatch{op: "add", path: "/metadata/finalizers/-", value: "example.com/stuck"}]`), "/metadata/finalizers"},
		"add managedFields":            {jsonPatch(`[JSONPatch{op: "add", path: "/metadata/managedFields", value: []}]`), "/metadata/managedFields"},
		"add a kcp.io label (escaped)": {jsonPatch(`[JSONPatch{op: "add", path: "/metadata/labels/kcp.io~1location", value: "west"}]`), "/metadata/labels/kcp.io~1location"},
		"change kcp.io/cluster":        {jsonPatch(`[JSONPatch{op: "replace", path: "/metadata/annotations/kcp.io~1cluster", value: "other"}]`), "/metadata/annotations/kcp.io~1cluster"},
		"add a status record":          {jsonPatch(`[JSONPatch{op: "add", path: "/metadata/annotations/status.kcp.io~1west", value: "{}"}]`), "/metadata/annotations/status.kcp.io~1west"},
		"write status":                 {jsonPatch(`[JSONPatch{op: "replace", path: "/status/replicas", value: 5}]`), "/status"},
		"apply a namespace":            {applyConfiguration(`Object{metadata: Object.metadata{namespace: "tenant-b"}}`), "/metadata/namespace"},
		"apply a name":                 {applyConfiguration(`Object{metadata: Object.metadata{name: "victim"}}`), "/metadata/name"},
		"apply a kcp.io label":         {applyConfiguration(`Object{metadata: Object.metadata{labels: {"kcp.io/location": "west"}}}`), "/metadata/labels/kcp.io~1location"},
		"apply a *.kcp.io annotation":  {applyConfiguration(`Object{metadata: Object.metadata{annotations: {"outcome.kcp.io/east": "{}"}}}`), "/metadata/annotations/outcome.kcp.io~1east"},
		"apply a finalizer":            {applyConfiguration(`Object{metadata: Object.metadata{finalizers: ["example.com/stuck"]}}`), "/metadata/finalizers"},
		"apply a status":               {applyConfiguration(`Object{status: Object.status{replicas: 1}}`), "/status"},
	}
	harmless := jsonPatch(`[JSONPatch{op: "replace", path: "/spec/replicas", value: 4}]`)
	for name, tc := range refused {
		for _, second := range []bool{false, true} {
			mutations, field := []admissionregistrationv1.Mutation{tc.mutation}, "spec.mutations[0]"
			if second {
				mutations, field = []admissionregistrationv1.Mutation{harmless, tc.mutation}, "spec.mutations[1]"
			}
			s := snapshot(t, customization("hostile", mutations...))
			re := renderError(t, s, guarded(), "east")
			if re.Reason != ReasonProtectedFieldChanged || re.Customization != "hostile" || re.Field != field ||
				!strings.Contains(re.Error(), tc.path) {
				t.Errorf("%s (second %v): got %q (reason %s, field %s), want %s on %s naming %q", name, second, re.Error(), re.Reason, re.Field, ReasonProtectedFieldChanged, field, tc.path)
			}
		}
	}

	// A mutation that changes a mark and one that restores it: refused at the first.
	s := snapshot(t, customization("restore",
		jsonPatch(`[JSONPatch{op: "replace", path: "/metadata/annotations/kcp.io~1cluster", value: "other"}]`),
		jsonPatch(`[JSONPatch{op: "replace", path: "/metadata/annotations/kcp.io~1cluster", value: "default"}]`)))
	if re := renderError(t, s, guarded(), "east"); re.Reason != ReasonProtectedFieldChanged || re.Field != "spec.mutations[0]" {
		t.Errorf("change and restore: %v (field %s), want a refusal of spec.mutations[0]", re, re.Field)
	}

	// The object's own patch, after Customizations that are allowed.
	in := guarded()
	ann := in.GetAnnotations()
	ann[contract.SpecDiffAnnotation("east")] = `[{"op":"replace","path":"/metadata","value":{"name":"victim","namespace":"tenant-b"}}]`
	in.SetAnnotations(ann)
	s = snapshot(t, customization("fine", harmless, applyConfiguration(`Object{metadata: Object.metadata{labels: {"tier": "edge"}, annotations: {"example.com/x": "y"}}}`)))
	if re := renderError(t, s, in, "east"); re.Reason != ReasonProtectedFieldChanged || re.Customization != "" ||
		!strings.Contains(re.Error(), contract.SpecDiffAnnotation("east")) {
		t.Errorf("spec-diff replacing /metadata: %v (reason %s), want %s naming the annotation", re, re.Reason, ReasonProtectedFieldChanged)
	}
	out := render(t, s, guarded(), "east")
	if out.GetLabels()["tier"] != "edge" || out.GetAnnotations()["example.com/x"] != "y" {
		t.Errorf("allowed label and annotation not rendered: %v %v", out.GetLabels(), out.GetAnnotations())
	}
	if p, changed := rendercheck.Changed(guarded(), out); changed {
		t.Errorf("an allowed rendering changed %s", p)
	}
}

// configMapsGVR is the resource of blowUp.
var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// blowUp is a Customization of 4 mutations, each adding a list of 8
// copies of the object so far. Each costs CEL almost nothing, and the rendering of a one-key
// ConfigMap grows 9-fold per mutation, to about 6,561 times its size.
func blowUp() *controlv1alpha1.Customization {
	c := customization("blow-up")
	c.Spec.Resources = []controlv1alpha1.ResourceRule{{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}
	for i := 0; i < 4; i++ {
		c.Spec.Mutations = append(c.Spec.Mutations, jsonPatch(`[JSONPatch{op: "add", path: "/data/copy`+string(rune('0'+i))+`",
		  value: [object, object, object, object, object, object, object, object]}]`))
	}
	return c
}

// oneKeyConfigMap is apps/one with one 1,000-byte key.
func oneKeyConfigMap() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": "one", "namespace": "apps", "uid": "u-1", "resourceVersion": "7",
			"annotations": map[string]interface{}{"kcp.io/cluster": "default"}},
		"data": map[string]interface{}{"key": strings.Repeat("v", 1000)},
	}}
}

// TestRenderingTooLarge (docs/customization.md, "What a rendering may not change"): the 4-mutation blow-up of a one-key
// ConfigMap stops at the mutation that passes the bound, with ReasonRenderingTooLarge naming
// it and the bound; under a larger bound it renders (the limit is what stops it, not CEL).
func TestRenderingTooLarge(t *testing.T) {
	s, errs := NewCompiler(Options{PlainCluster: "default"}).Snapshot(1, []*controlv1alpha1.Customization{blowUp()}, locations)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	_, err := s.Render(context.Background(), configMapsGVR, "default", oneKeyConfigMap(), "east")
	re, ok := err.(*RenderError)
	if !ok || re.Reason != ReasonRenderingTooLarge || re.Customization != "blow-up" || re.Field != "spec.mutations[3]" ||
		!strings.Contains(re.Error(), "3145728") {
		t.Fatalf("got %v, want %s at spec.mutations[3] naming the bound 3145728", err, ReasonRenderingTooLarge)
	}
	t.Log(re)

	big, errs := NewCompiler(Options{PlainCluster: "default", MaxRenderingBytes: 64 << 20}).Snapshot(1, []*controlv1alpha1.Customization{blowUp()}, locations)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	out, err := big.Render(context.Background(), configMapsGVR, "default", oneKeyConfigMap(), "east")
	if err != nil {
		t.Fatalf("under a 64 MiB bound: %v", err)
	}
	b, _ := json.Marshal(out.Object)
	t.Logf("the rendering without the bound: %d bytes", len(b))
	if len(b) < 4<<20 {
		t.Errorf("the blow-up renders %d bytes, want more than 4 MiB (else the test does not test the bound)", len(b))
	}
}
