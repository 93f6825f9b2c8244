package mapper

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// mappingObject returns a ResourceMapping in the view's JSON form; target nil leaves
// spec.target out.
func mappingObject(name string, source schema.GroupVersionResource, target *schema.GroupVersionResource, kind string) *unstructured.Unstructured {
	spec := map[string]interface{}{"source": map[string]interface{}{"group": source.Group, "version": source.Version, "resource": source.Resource}}
	if target != nil {
		spec["target"] = map[string]interface{}{"group": target.Group, "version": target.Version, "resource": target.Resource, "kind": kind}
	}
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "control.mapper.kcp.io/v1alpha1", "kind": "ResourceMapping",
		"metadata": map[string]interface{}{"name": name}, "spec": spec,
	}}
}

func TestProjections(t *testing.T) {
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	gadgets := schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "gadgets"}
	gizmos := schema.GroupVersionResource{Group: "other.example", Version: "v1", Resource: "gizmos"}
	key := func(name string) string { return string(contract.NewKey("root", "", name)) }

	projections, verdicts := Projections(map[string]*unstructured.Unstructured{
		key("a"):   mappingObject("a", widgets, &gizmos, "Gizmo"),
		key("b"):   mappingObject("b", gadgets, nil, ""),
		key("c1"):  mappingObject("c1", schema.GroupVersionResource{Group: "x.example", Version: "v1", Resource: "things"}, &gizmos, "Gizmo"),
		key("c2"):  mappingObject("c2", schema.GroupVersionResource{Group: "x.example", Version: "v2", Resource: "things"}, nil, ""),
		key("bad"): {Object: map[string]interface{}{"kind": "ResourceMapping", "spec": "not an object"}},
	})

	p := projections[widgets.GroupResource()]
	if p.Mapping != key("a") || p.SourceVersion != "v1" || p.TargetResource(widgets) != gizmos || p.TargetKind() != gizmos.GroupVersion().WithKind("Gizmo") || p.Blocked != "" {
		t.Errorf("widgets: got %+v", p)
	}
	if !verdicts[key("a")].Accepted {
		t.Errorf("a: got %+v, want accepted", verdicts[key("a")])
	}

	// Without spec.target: read at spec.source.version, written as it is.
	p = projections[gadgets.GroupResource()]
	if p.SourceVersion != "v2" || p.TargetResource(gadgets) != gadgets || !p.TargetKind().Empty() || !verdicts[key("b")].Accepted {
		t.Errorf("gadgets: got %+v, verdict %+v", p, verdicts[key("b")])
	}

	// Two mappings of one group/resource (any versions): neither is used, the resource is blocked.
	things := projections[schema.GroupResource{Group: "x.example", Resource: "things"}]
	if things.Blocked == "" || things.Mapping != "" || !strings.Contains(things.Blocked, "root/c1, root/c2") {
		t.Errorf("things: got %+v, want blocked naming both mappings", things)
	}
	for _, k := range []string{key("c1"), key("c2")} {
		if v := verdicts[k]; v.Accepted || v.Reason != "Conflict" {
			t.Errorf("%s: got %+v, want a Conflict", k, v)
		}
	}

	// A mapping that cannot be read names nothing and affects nothing else.
	if v := verdicts[key("bad")]; v.Accepted || v.Reason != "Invalid" {
		t.Errorf("bad: got %+v, want Invalid", v)
	}
	if len(projections) != 3 {
		t.Errorf("got %d projections, want 3: %v", len(projections), projections)
	}

	// A resource no mapping names keeps its own resource and kind.
	var none Projection
	if none.TargetResource(widgets) != widgets || !none.TargetKind().Empty() {
		t.Errorf("zero Projection: got %v %v", none.TargetResource(widgets), none.TargetKind())
	}
}

func TestTransformProjects(t *testing.T) {
	src := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]interface{}{"name": "w", "namespace": "ns", "uid": "u1"},
		"spec":     map[string]interface{}{"size": int64(3), "nested": map[string]interface{}{"a": "b"}},
		"status":   map[string]interface{}{"phase": "Ready"},
	}}
	got := Transform(src, TargetObject{Location: "east", Namespace: "ns", Source: SourceRef{Cluster: "c", Namespace: "ns", Name: "w"},
		Kind: schema.GroupVersionKind{Group: "other.example", Version: "v1", Kind: "Gizmo"}})
	if got.GetAPIVersion() != "other.example/v1" || got.GetKind() != "Gizmo" {
		t.Errorf("got %s %s, want other.example/v1 Gizmo", got.GetAPIVersion(), got.GetKind())
	}
	if v, _, _ := unstructured.NestedString(got.Object, "spec", "nested", "a"); v != "b" {
		t.Errorf("spec not copied as it is: %v", got.Object["spec"])
	}
	if _, ok := got.Object["status"]; ok {
		t.Errorf("status copied")
	}
	if src.GetKind() != "Widget" {
		t.Errorf("the source object was changed")
	}
}

// TestFitResourcesLeavesOutSharedTargets: resources whose copies would be written as one target
// resource are not mapped at all, since each one's orphan sweep would delete the other's copies
// (same location label, sources not in its own view); the others are mapped as before.
func TestFitResourcesLeavesOutSharedTargets(t *testing.T) {
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	gizmos := schema.GroupVersionResource{Group: "other.example", Version: "v1", Resource: "gizmos"}
	cogs := schema.GroupVersionResource{Group: "other.example", Version: "v1", Resource: "cogs"}
	sprockets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "sprockets"}
	configmaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	key := func(name string) string { return string(contract.NewKey("root", "", name)) }
	projections, _ := Projections(map[string]*unstructured.Unstructured{
		key("onto-a-served-resource"): mappingObject("onto-a-served-resource", widgets, &gizmos, "Gizmo"),
		key("two-onto-cogs-1"):        mappingObject("two-onto-cogs-1", sprockets, &cogs, "Cog"),
		key("two-onto-cogs-2"):        mappingObject("two-onto-cogs-2", configmaps, &cogs, "Cog"),
	})
	wanted := map[schema.GroupVersionResource]bool{widgets: true, gizmos: true, sprockets: true, configmaps: true, MappingResource: false,
		{Group: "apps", Version: "v1", Resource: "deployments"}: true}
	collisions := FitResources(wanted, projections)
	if len(wanted) != 1 || !wanted[schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}] {
		t.Errorf("mapped %v, want only deployments", wanted)
	}
	if len(collisions) != 2 || !strings.Contains(collisions[0].Message, "configmaps, sprockets.example.com would all be written as cogs.other.example") ||
		!strings.Contains(collisions[1].Message, "gizmos.other.example, widgets.example.com would all be written as gizmos.other.example") {
		t.Errorf("collisions %+v", collisions)
	}
	if want := []string{key("two-onto-cogs-1"), key("two-onto-cogs-2")}; len(collisions) == 2 && strings.Join(collisions[0].Mappings, ",") != strings.Join(want, ",") {
		t.Errorf("collision mappings %q, want %q", collisions[0].Mappings, want)
	}
}

// TestProjectionsRefuseRelatedEntriesThatDoNotCompile: a mapping with an entry of origin
// Target that does not compile is not accepted (reason InvalidRelated, naming the entry and
// its field) and blocks its source resource; an entry of origin Source is not the mapper's
// and is not compiled here; a mapping whose entries compile is accepted.
func TestProjectionsRefuseRelatedEntriesThatDoNotCompile(t *testing.T) {
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	gadgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}
	cogs := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "cogs"}
	key := func(name string) string { return string(contract.NewKey("root", "", name)) }
	withRelated := func(u *unstructured.Unstructured, origin, name string) *unstructured.Unstructured {
		u.Object["spec"].(map[string]interface{})["related"] = []interface{}{map[string]interface{}{
			"identifier": "credentials", "origin": origin,
			"resource": map[string]interface{}{"version": "v1", "resource": "secrets"},
			"object":   map[string]interface{}{"name": name},
		}}
		return u
	}
	projections, verdicts := Projections(map[string]*unstructured.Unstructured{
		key("bad"):    withRelated(mappingObject("bad", widgets, nil, ""), "Target", `object.metadata.name +`),
		key("source"): withRelated(mappingObject("source", gadgets, nil, ""), "Source", `object.metadata.name +`),
		key("good"):   withRelated(mappingObject("good", cogs, nil, ""), "Target", `object.metadata.name + "-credentials"`),
	})
	v := verdicts[key("bad")]
	if v.Accepted || v.Reason != "InvalidRelated" || !strings.Contains(v.Message, "spec.related[0] (credentials): object.name") {
		t.Errorf("bad: got %+v, want InvalidRelated naming spec.related[0] (credentials): object.name", v)
	}
	if p := projections[widgets.GroupResource()]; p.Blocked == "" {
		t.Errorf("widgets: got %+v, want blocked", p)
	}
	for _, k := range []string{key("source"), key("good")} {
		if !verdicts[k].Accepted {
			t.Errorf("%s: got %+v, want accepted", k, verdicts[k])
		}
	}
}
