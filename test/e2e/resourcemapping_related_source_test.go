package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// widgetLabel is the label by which TestResourceMappingRelatedSource's labelSelector entry
// relates ConfigMaps to a widget.
const widgetLabel = "example.com/widget"

// TestResourceMappingRelatedSource runs a real source, mapper-apiserver, target, mapper and
// mapper-controller with a ResourceMapping of widgets.example.com whose spec.related has two
// entries of origin Source (docs/resourcemapping.md, "Related objects: origin Source"): the
// ConfigMap a widget names in spec.configMap, and the ConfigMaps labelled with the widget's
// name.
//   - The related ConfigMaps get the widget's location, and the mapper copies them onto the
//     target; a ConfigMap labelled for another widget does not follow.
//   - They follow only to the locations the mapping is assigned to: a widget on east and
//     north while the mapping is on east gives its ConfigMap east alone; the mapping assigned
//     to north too gives it north.
//   - A deleted widget takes them with it: they lose its locations, and their copies leave
//     the target.
//   - mapper-controller reports RelatedResolved=True on the mapping next to the mapper's
//     Accepted=True (neither clobbers the other), CompilationFailed on a mapping whose
//     expression does not compile, and EvaluationFailed naming a widget it cannot read.
func TestResourceMappingRelatedSource(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	env := startMappingEnv(t, ctx, "widgets.example.com,gadgets.example.com,configmaps", func(src, tgt dynamic.Interface) {
		createCRD(t, ctx, src, "widgets", "Widget")
		createCRD(t, ctx, tgt, "widgets", "Widget")
		createCRD(t, ctx, src, "gadgets", "Gadget")
	})
	src := env.src
	framework.InstallControlCRDs(t, ctx, env.source)
	framework.StartMapperController(t, ctx, env.source, 5*time.Second)

	mappings := src.Resource(mapper.MappingResource)
	rm := newResourceMapping("widgets-related", widgetsGVR, schema.GroupVersionResource{}, "", "east")
	rm.Object["spec"].(map[string]interface{})["related"] = []interface{}{
		relatedSourceEntry("config", map[string]interface{}{"name": "object.spec.configMap"}),
		relatedSourceEntry("labelled", map[string]interface{}{"labelSelector": map[string]interface{}{widgetLabel: "object.metadata.name"}}),
	}
	if _, err := mappings.Create(ctx, rm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ResourceMapping widgets-related: %v", err)
	}

	const ns = "apps"
	ensureNamespace(t, ctx, src, ns)
	configMap := func(name, widget string, locations ...string) {
		t.Helper()
		cm := newConfigMap(ns, name, locations...)
		if widget != "" {
			cm.SetLabels(map[string]string{widgetLabel: widget})
		}
		if _, err := src.Resource(configMapsGVR).Namespace(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	widget := func(name, configMap string, locations ...string) {
		t.Helper()
		w := newWidget(widgetsGVR, "Widget", ns, name, locations...)
		if configMap != "" {
			w.Object["spec"].(map[string]interface{})["configMap"] = configMap
		}
		if _, err := src.Resource(widgetsGVR).Namespace(ns).Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// anchor keeps the view of east non-empty: a mapper never sweeps an empty view.
	configMap("anchor", "", "east")
	configMap("w1-settings", "")
	configMap("w1-extra", "w1")
	configMap("w2-settings", "")
	configMap("w2-extra", "w2")
	widget("w1", "w1-settings", "east")
	env.startMapper(t, "mapper-east", "east", nil, "--namespace-mapping=same")

	assigned := func(names ...string) string {
		var parts []string
		for _, n := range names {
			parts = append(parts, n+"="+assignedTo(ctx, src, configMapsGVR, ns, n))
		}
		return strings.Join(parts, " ")
	}
	mapperEventually(t, ctx, time.Minute, "w1's ConfigMaps, by name and by label, follow it to east", func() (bool, string) {
		got := assigned("w1-settings", "w1-extra", "w2-extra")
		return got == `w1-settings=["east"] w1-extra=["east"] w2-extra=`, got
	})
	mapperEventually(t, ctx, time.Minute, "the mapper copies them onto the target", func() (bool, string) {
		for _, n := range []string{"w1-settings", "w1-extra"} {
			if env.targetObject(t, ctx, "east", configMapsGVR, ns, n) == nil {
				return false, "no ConfigMap " + n + " on the target"
			}
		}
		return env.targetObject(t, ctx, "east", widgetsGVR, ns, "w1") != nil, "no widget w1 on the target"
	})
	waitCondition(t, ctx, src, mapper.MappingResource, "", "widgets-related", controlv1alpha1.ResourceMappingRelatedResolved, metav1.ConditionTrue, controlv1alpha1.ReasonResolved, time.Minute)
	waitCondition(t, ctx, src, mapper.MappingResource, "", "widgets-related", controlv1alpha1.ResourceMappingAccepted, metav1.ConditionTrue, controlv1alpha1.ReasonAccepted, time.Minute)
	// Both writers' conditions in one read: neither write took the other's away.
	if conds := mappingConditions(t, ctx, src, "widgets-related"); !strings.Contains(conds, "RelatedResolved=True (Resolved)") || !strings.Contains(conds, "Accepted=True (Accepted)") {
		t.Errorf("the mapping's conditions are %s, want RelatedResolved and Accepted", conds)
	}

	// Only where the mapping is: w2 is on east and north, the mapping on east. The first
	// assignment of w2's ConfigMaps is written whole, so ["east"] shows that north was left out.
	widget("w2", "w2-settings", "east", "north")
	mapperEventually(t, ctx, time.Minute, "w2's ConfigMaps follow it to east alone, where the mapping is", func() (bool, string) {
		got := assigned("w2-settings", "w2-extra")
		return got == `w2-settings=["east"] w2-extra=["east"]`, got
	})
	env.mutate(t, ctx, mapper.MappingResource, "", "widgets-related", func(u *unstructured.Unstructured) { setAssignment(u, "east", "north") })
	mapperEventually(t, ctx, time.Minute, "the mapping on north too: w2's ConfigMaps follow it there", func() (bool, string) {
		got := assigned("w2-settings", "w2-extra", "w1-settings")
		return got == `w2-settings=["east","north"] w2-extra=["east","north"] w1-settings=["east"]`, got
	})

	// A deleted widget takes its ConfigMaps with it (once its copy is gone: its finalizer).
	if err := src.Resource(widgetsGVR).Namespace(ns).Delete(ctx, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mapperEventually(t, ctx, time.Minute, "w1's ConfigMaps leave with it", func() (bool, string) {
		got := assigned("w1-settings", "w1-extra")
		return got == `w1-settings= w1-extra=`, got
	})
	mapperEventually(t, ctx, time.Minute, "their copies leave the target", func() (bool, string) {
		for _, n := range []string{"w1-settings", "w1-extra"} {
			if env.targetObject(t, ctx, "east", configMapsGVR, ns, n) != nil {
				return false, "ConfigMap " + n + " still on the target"
			}
		}
		return true, ""
	})
	if got := assigned("w2-settings"); got != `w2-settings=["east","north"]` {
		t.Errorf("w2's ConfigMap lost locations with w1: %s", got)
	}

	// Failures are reported on the mapping and change nothing else.
	broken := newResourceMapping("gadgets-broken", gadgetsGVR, schema.GroupVersionResource{}, "")
	broken.Object["spec"].(map[string]interface{})["related"] = []interface{}{
		relatedSourceEntry("config", map[string]interface{}{"name": "object.spec.configMap +"}),
	}
	if _, err := mappings.Create(ctx, broken, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ResourceMapping gadgets-broken: %v", err)
	}
	msg := waitCondition(t, ctx, src, mapper.MappingResource, "", "gadgets-broken", controlv1alpha1.ResourceMappingRelatedResolved, metav1.ConditionFalse, controlv1alpha1.ReasonCompilationFailed, time.Minute)
	if !strings.Contains(msg, "spec.related[config].object.name") {
		t.Errorf("the CompilationFailed message does not name the expression: %s", msg)
	}
	const other = "other"
	ensureNamespace(t, ctx, src, other)
	unreadable := newWidget(widgetsGVR, "Widget", other, "w3", "east")
	if _, err := src.Resource(widgetsGVR).Namespace(other).Create(ctx, unreadable, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	msg = waitCondition(t, ctx, src, mapper.MappingResource, "", "widgets-related", controlv1alpha1.ResourceMappingRelatedResolved, metav1.ConditionFalse, controlv1alpha1.ReasonEvaluationFailed, time.Minute)
	if !strings.Contains(msg, "other/w3") || !strings.Contains(msg, "no such key") {
		t.Errorf("the EvaluationFailed message does not name the widget and the error: %s", msg)
	}
	if got := assigned("w2-settings", "w2-extra"); got != `w2-settings=["east","north"] w2-extra=["east","north"]` {
		t.Errorf("a failure in another namespace changed w2's ConfigMaps: %s", got)
	}
	if conds := mappingConditions(t, ctx, src, "widgets-related"); !strings.Contains(conds, controlv1alpha1.ResourceMappingAccepted+"=True") {
		t.Errorf("the mapper's Accepted condition is gone: %s", conds)
	}
}

// mappingConditions returns the conditions of the ResourceMapping name as "type=status
// (reason)" in one read.
func mappingConditions(t *testing.T, ctx context.Context, src dynamic.Interface, name string) string {
	t.Helper()
	u, err := src.Resource(mapper.MappingResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var out []string
	for _, c := range raw {
		m, _ := c.(map[string]interface{})
		out = append(out, fmt.Sprintf("%v=%v (%v)", m["type"], m["status"], m["reason"]))
	}
	return strings.Join(out, ", ")
}

// relatedSourceEntry returns an entry of origin Source of spec.related relating ConfigMaps by
// object (name or labelSelector).
func relatedSourceEntry(identifier string, object map[string]interface{}) map[string]interface{} {
	return map[string]interface{}{
		"identifier": identifier, "origin": string(controlv1alpha1.RelatedOriginSource),
		"resource": gvrField(configMapsGVR), "object": object,
	}
}
