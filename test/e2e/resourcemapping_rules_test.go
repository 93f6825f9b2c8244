package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestResourceMappingCRDRules applies the ResourceMapping CRD of artifacts/crds to a real
// kube-apiserver and creates one mapping per rule of its schema and CEL rules
// (docs/resourcemapping.md, "Validation and bad mappings"): each breaking mapping is refused
// with 422 Invalid and the rule's message, and a mapping using every field is accepted.
func TestResourceMappingCRDRules(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	source := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source"})
	framework.InstallControlCRD(t, ctx, source, mapper.MappingResource)
	mappings := dynamicClientFor(t, source).Resource(mapper.MappingResource)

	// good returns a spec that uses every field: a projection, names, and related entries of
	// both origins, found by a name and by labels.
	good := func() map[string]interface{} {
		target := gvrField(gizmosGVR)
		target["kind"] = "Gizmo"
		return map[string]interface{}{
			"source": gvrField(widgetsGVR),
			"target": target,
			"naming": map[string]interface{}{"namespace": `"tenant-" + cluster + "-" + namespace`, "name": `name + "-" + location`},
			"related": []interface{}{
				relatedSourceEntry("settings", map[string]interface{}{"name": "object.spec.configMap"}),
				relatedSourceEntry("dashboards", map[string]interface{}{"labelSelector": map[string]interface{}{widgetLabel: "object.metadata.name"}}),
				map[string]interface{}{
					"identifier": "credentials", "origin": "Target",
					"resource": gvrField(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}),
					"object":   map[string]interface{}{"name": `object.metadata.name + "-credentials"`},
					"name":     `object.metadata.name + "-" + location`,
				},
			},
		}
	}
	related := func(spec map[string]interface{}, i int) map[string]interface{} {
		return spec["related"].([]interface{})[i].(map[string]interface{})
	}
	for _, tc := range []struct {
		name   string
		change func(spec map[string]interface{})
		// want are parts of the refusal's message; nil: the mapping is accepted.
		want []string
	}{
		{"a mapping using every field", func(map[string]interface{}) {}, nil},
		{"an identity mapping (no target)", func(spec map[string]interface{}) { delete(spec, "target") }, nil},
		{"source in control.mapper.kcp.io", func(spec map[string]interface{}) {
			spec["source"] = gvrField(mapper.MappingResource)
		}, []string{"spec.source", "the resources of cluster-mapper's own groups cannot be mapped"}},
		{"source in mapper.kcp.io", func(spec map[string]interface{}) {
			spec["source"] = gvrField(schema.GroupVersionResource{Group: "mapper.kcp.io", Version: "v1alpha1", Resource: "locations"})
		}, []string{"spec.source", "the resources of cluster-mapper's own groups cannot be mapped"}},
		{"target equal to source", func(spec map[string]interface{}) {
			target := gvrField(widgetsGVR)
			target["kind"] = "Widget"
			spec["target"] = target
		}, []string{"spec.target names spec.source itself; leave it out for an identity mapping"}},
		{"a subresource as source", func(spec map[string]interface{}) {
			spec["source"].(map[string]interface{})["resource"] = "widgets/status"
		}, []string{"spec.source.resource", "name a resource, not a subresource"}},
		{"a subresource as target", func(spec map[string]interface{}) {
			spec["target"].(map[string]interface{})["resource"] = "gizmos/scale"
		}, []string{"spec.target.resource", "name a resource, not a subresource"}},
		{"a subresource as related resource", func(spec map[string]interface{}) {
			related(spec, 0)["resource"].(map[string]interface{})["resource"] = "configmaps/status"
		}, []string{"spec.related[0].resource.resource", "name a resource, not a subresource"}},
		{"a source without version", func(spec map[string]interface{}) {
			delete(spec["source"].(map[string]interface{}), "version")
		}, []string{"spec.source.version", "Required value"}},
		{"a target without kind", func(spec map[string]interface{}) {
			delete(spec["target"].(map[string]interface{}), "kind")
		}, []string{"spec.target.kind", "Required value"}},
		{"a kind that is not a Kind name", func(spec map[string]interface{}) {
			spec["target"].(map[string]interface{})["kind"] = "gizmo"
		}, []string{"spec.target.kind", "should match '^[A-Z][A-Za-z0-9]*$'"}},
		{"a related name for origin Source", func(spec map[string]interface{}) {
			related(spec, 0)["name"] = `object.metadata.name + "-x"`
		}, []string{"spec.related[0]", "name is the name of a copy brought up from the target: only for origin Target"}},
		{"both object.name and object.labelSelector", func(spec map[string]interface{}) {
			related(spec, 1)["object"].(map[string]interface{})["name"] = "object.spec.configMap"
		}, []string{"spec.related[1].object", "set exactly one of name and labelSelector"}},
		{"neither object.name nor object.labelSelector", func(spec map[string]interface{}) {
			related(spec, 0)["object"] = map[string]interface{}{}
		}, []string{"spec.related[0].object", "set exactly one of name and labelSelector"}},
		{"an identifier that is not a DNS label", func(spec map[string]interface{}) {
			related(spec, 0)["identifier"] = "Settings_1"
		}, []string{"spec.related[0].identifier", "should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'"}},
		{"an origin that is neither Source nor Target", func(spec map[string]interface{}) {
			related(spec, 0)["origin"] = "Both"
		}, []string{"spec.related[0].origin", `Unsupported value: "Both"`}},
		{"two entries with one identifier", func(spec map[string]interface{}) {
			related(spec, 1)["identifier"] = "settings"
		}, []string{"spec.related[1]", "Duplicate value", `"identifier":"settings"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := good()
			tc.change(spec)
			u := &unstructured.Unstructured{Object: map[string]interface{}{
				"apiVersion": mapper.MappingResource.GroupVersion().String(), "kind": "ResourceMapping",
				"metadata": map[string]interface{}{"generateName": "rule-"},
				"spec":     spec,
			}}
			_, err := mappings.Create(ctx, u, metav1.CreateOptions{})
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("a good mapping is refused: %v", err)
			case tc.want == nil:
			case err == nil:
				t.Fatalf("accepted, want a refusal with %q", tc.want)
			case !apierrors.IsInvalid(err):
				t.Fatalf("refused with %v (reason %s), want 422 Invalid", err, apierrors.ReasonForError(err))
			default:
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("the refusal %q does not say %q", err.Error(), w)
					}
				}
			}
		})
	}
}

// TestResourceMappingConflict runs a real source, mapper-apiserver, target and mapper with two
// ResourceMappings of the location east naming one source resource (widgets.example.com onto
// gizmos, and onto cogs): the mapper uses neither (docs/resourcemapping.md, "Validation and bad
// mappings"). Each mapping's status for east says Accepted=False, reason Conflict (the one
// assigned to east alone in its .status, the one assigned to east and west in its record
// status.kcp.io/east, docs/status.md), and nothing of widgets is written on the target while
// another resource of the view is; once one mapping is deleted, the other is Accepted and the
// widgets appear as its target resource.
func TestResourceMappingConflict(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := startMappingEnv(t, ctx, "widgets.example.com,configmaps", func(src, tgt dynamic.Interface) {
		createCRD(t, ctx, src, "widgets", "Widget")
		createCRD(t, ctx, tgt, "widgets", "Widget")
		createCRDIn(t, ctx, tgt, projectedGroup, "gizmos", "Gizmo")
		createCRDIn(t, ctx, tgt, projectedGroup, "cogs", "Cog")
	})
	src := env.src
	mappings := src.Resource(mapper.MappingResource)
	for _, rm := range []*unstructured.Unstructured{
		newResourceMapping("widgets-as-gizmos", widgetsGVR, gizmosGVR, "Gizmo", "east"),
		newResourceMapping("widgets-as-cogs", widgetsGVR, cogsGVR, "Cog", "east", "west"),
	} {
		if _, err := mappings.Create(ctx, rm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating ResourceMapping %s: %v", rm.GetName(), err)
		}
	}
	const ns = "apps"
	ensureNamespace(t, ctx, src, ns)
	if _, err := src.Resource(configMapsGVR).Namespace(ns).Create(ctx, newConfigMap(ns, "anchor", "east"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Resource(widgetsGVR).Namespace(ns).Create(ctx, newWidget(widgetsGVR, "Widget", ns, "w1", "east"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.startMapper(t, "mapper-east", "east", nil, "--namespace-mapping=same")

	mapperEventually(t, ctx, time.Minute, "both mappings report Conflict for east", func() (bool, string) {
		a, b := mappingAcceptedAt(t, ctx, src, "widgets-as-gizmos", "east", false), mappingAcceptedAt(t, ctx, src, "widgets-as-cogs", "east", true)
		return strings.HasPrefix(a, "False (Conflict)") && strings.HasPrefix(b, "False (Conflict)"), "widgets-as-gizmos: " + a + "; widgets-as-cogs: " + b
	})
	mapperEventually(t, ctx, time.Minute, "the view's other resource is written", func() (bool, string) {
		return env.targetObject(t, ctx, "east", configMapsGVR, ns, "anchor") != nil, "no ConfigMap anchor on the target"
	})
	for _, gvr := range []schema.GroupVersionResource{gizmosGVR, cogsGVR, widgetsGVR} {
		if env.targetObject(t, ctx, "east", gvr, ns, "w1") != nil {
			t.Errorf("the widget was written as %s although its mappings conflict", gvr.GroupResource())
		}
	}

	if err := mappings.Delete(ctx, "widgets-as-cogs", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mapperEventually(t, ctx, time.Minute, "the remaining mapping is Accepted", func() (bool, string) {
		a := mappingAcceptedAt(t, ctx, src, "widgets-as-gizmos", "east", false)
		return strings.HasPrefix(a, "True (Accepted)"), a
	})
	mapperEventually(t, ctx, time.Minute, "the widget appears as a Gizmo", func() (bool, string) {
		return env.targetObject(t, ctx, "east", gizmosGVR, ns, "w1") != nil, "no gizmo apps/w1 on the target"
	})
	if env.targetObject(t, ctx, "east", cogsGVR, ns, "w1") != nil {
		t.Errorf("the widget was written as a Cog by the deleted mapping")
	}
}

// TestResourceMappingProjectionChange changes a ResourceMapping's spec.target (gizmos to cogs)
// while a real mapper maps by it: the mapper restarts the resource under the new projection,
// so the widgets are written as Cogs, a widget created after the change only as a Cog, and
// the Gizmos made under the former projection stay on the target (docs/resourcemapping.md,
// "Limits and what is still to come").
func TestResourceMappingProjectionChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := startMappingEnv(t, ctx, "widgets.example.com", func(src, tgt dynamic.Interface) {
		createCRD(t, ctx, src, "widgets", "Widget")
		createCRDIn(t, ctx, tgt, projectedGroup, "gizmos", "Gizmo")
		createCRDIn(t, ctx, tgt, projectedGroup, "cogs", "Cog")
	})
	src := env.src
	if _, err := src.Resource(mapper.MappingResource).Create(ctx, newResourceMapping("widgets", widgetsGVR, gizmosGVR, "Gizmo", "east"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const ns = "apps"
	ensureNamespace(t, ctx, src, ns)
	createWidget := func(name string) {
		t.Helper()
		if _, err := src.Resource(widgetsGVR).Namespace(ns).Create(ctx, newWidget(widgetsGVR, "Widget", ns, name, "east"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createWidget("w1")
	env.startMapper(t, "mapper-east", "east", nil, "--namespace-mapping=same")
	mapperEventually(t, ctx, time.Minute, "w1 is written as a Gizmo", func() (bool, string) {
		return env.targetObject(t, ctx, "east", gizmosGVR, ns, "w1") != nil, "no gizmo apps/w1 on the target"
	})

	env.mutate(t, ctx, mapper.MappingResource, "", "widgets", func(u *unstructured.Unstructured) {
		target := gvrField(cogsGVR)
		target["kind"] = "Cog"
		u.Object["spec"].(map[string]interface{})["target"] = target
	})
	mapperEventually(t, ctx, time.Minute, "w1 is written as a Cog under the new projection", func() (bool, string) {
		c := env.targetObject(t, ctx, "east", cogsGVR, ns, "w1")
		if c == nil {
			return false, "no cog apps/w1 on the target"
		}
		return c.GetKind() == "Cog" && c.GetLabels()[contract.LocationLabel] == "east", fmt.Sprintf("cog is %s, labels %v", c.GetKind(), c.GetLabels())
	})
	createWidget("w2")
	mapperEventually(t, ctx, time.Minute, "w2, created after the change, is written as a Cog", func() (bool, string) {
		return env.targetObject(t, ctx, "east", cogsGVR, ns, "w2") != nil, "no cog apps/w2 on the target"
	})
	if env.targetObject(t, ctx, "east", gizmosGVR, ns, "w2") != nil {
		t.Errorf("w2, created after the projection changed, was written as a Gizmo")
	}
	if env.targetObject(t, ctx, "east", gizmosGVR, ns, "w1") == nil {
		t.Errorf("the Gizmo made under the former projection was deleted; the docs say it stays")
	}
	mapperEventually(t, ctx, time.Minute, "the mapping reports Accepted for its new generation", func() (bool, string) {
		u, err := src.Resource(mapper.MappingResource).Get(ctx, "widgets", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		a := mappingAcceptedAt(t, ctx, src, "widgets", "east", false)
		return a == fmt.Sprintf("True (Accepted) generation %d", u.GetGeneration()), a
	})
}

// mappingAcceptedAt returns the Accepted condition that location's mapper wrote on the
// ResourceMapping name, as "<status> (<reason>) generation <observedGeneration>": from the
// location's status record status.kcp.io/<location> when record (a mapping assigned to several
// locations, docs/status.md), from .status otherwise. "" when there is none.
func mappingAcceptedAt(t *testing.T, ctx context.Context, src dynamic.Interface, name, location string, record bool) string {
	t.Helper()
	u, err := src.Resource(mapper.MappingResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status, _ := u.Object["status"].(map[string]interface{})
	if record {
		rec, ok, err := contract.StatusRecord(u.GetAnnotations(), location)
		if !ok || err != nil {
			return fmt.Sprintf("no status record of %s (%v)", location, err)
		}
		status = rec
	}
	conds, _, _ := unstructured.NestedSlice(status, "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]interface{}); m["type"] == controlv1alpha1.ResourceMappingAccepted {
			return fmt.Sprintf("%v (%v) generation %v", m["status"], m["reason"], m["observedGeneration"])
		}
	}
	return fmt.Sprintf("no Accepted condition in %v", status)
}
