package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
)

var sprocketsGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "sprockets"}

// newNamingMapping returns a ResourceMapping of source with spec.naming namespace and name
// (either may be ""), without a target (the objects keep their resource), assigned to
// locations and opted in to status write-back.
func newNamingMapping(name string, source schema.GroupVersionResource, namespace, nameExpr string, locations ...string) *unstructured.Unstructured {
	u := newResourceMapping(name, source, source, "", locations...)
	naming := map[string]interface{}{}
	if namespace != "" {
		naming["namespace"] = namespace
	}
	if nameExpr != "" {
		naming["name"] = nameExpr
	}
	u.Object["spec"] = map[string]interface{}{
		"source": u.Object["spec"].(map[string]interface{})["source"],
		"naming": naming,
	}
	return u
}

// TestResourceMappingNaming runs a real source with SyncTargets, mapper-apiserver, target and
// mapper with three ResourceMappings assigned to the location (docs/resourcemapping.md,
// "Names"):
//   - widgets named into `"tenant-" + source.cluster + "-" + source.namespace`: the copy lands there (a
//     namespace the mapper creates), its status comes back to the widget, `mapper verify`
//     finds it in place, and deleting the widget deletes the copy there;
//   - gadgets all named `"shared-" + location`: two gadgets of one namespace collide; the lower
//     key (g1) takes the place, g2 carries the outcome record Conflict and a Warning Event
//     Conflict regarding it at the source, a Warning Event MappingConflict is on the target
//     namespace, the SyncTarget's status.resources entry of
//     gadgets says ObjectsInConflict, and g2 never overwrites g1's copy; once g1 is deleted,
//     g2 is mapped there, and g0, created then, does not take it although its key is lower;
//   - sprockets with a naming that does not compile: the mapping says Accepted=False
//     (InvalidNaming), the SyncTarget's ResourcesCompatible is False naming it, and no
//     sprocket is written anywhere.
func TestResourceMappingNaming(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	env := startLocationsEnvWith(t, ctx, "widgets.example.com,gadgets.example.com,sprockets.example.com,resourcemappings.control.mapper.kcp.io",
		func(dyn dynamic.Interface) {
			createCRD(t, ctx, dyn, "widgets", "Widget")
			createCRD(t, ctx, dyn, "gadgets", "Gadget")
			createCRD(t, ctx, dyn, "sprockets", "Sprocket")
		}, nil, "east")
	src, tgt := env.src, env.tgt["east"]
	for _, rm := range []*unstructured.Unstructured{
		newNamingMapping("widgets-per-tenant", widgetsGVR, `"tenant-" + source.cluster + "-" + source.namespace`, "", "east"),
		newNamingMapping("gadgets-shared", gadgetsGVR, "", `"shared-" + location`, "east"),
		newNamingMapping("sprockets-bad", sprocketsGVR, "", `object.metadata.name`, "east"),
	} {
		if _, err := src.Resource(mapper.MappingResource).Create(ctx, rm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating ResourceMapping %s: %v", rm.GetName(), err)
		}
	}
	ensureNamespace(t, ctx, src, "apps")
	reflect := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[contract.StatusPolicyAnnotation] = contract.StatusPolicyReflect
		u.SetAnnotations(ann)
		return u
	}
	for _, o := range []struct {
		gvr  schema.GroupVersionResource
		kind string
		name string
	}{{widgetsGVR, "Widget", "w1"}, {gadgetsGVR, "Gadget", "g1"}, {gadgetsGVR, "Gadget", "g2"}, {sprocketsGVR, "Sprocket", "s1"}} {
		if _, err := src.Resource(o.gvr).Namespace("apps").Create(ctx, reflect(newWidget(o.gvr, o.kind, "apps", o.name, "east")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	env.startMapper(t, "mapper-east", "east", nil, append([]string{"--namespace-mapping=same"}, locationMapperArgs...)...)

	// Widgets: the copy is at the named namespace, and only there.
	const tenantNS = "tenant-" + mapper.DefaultClusterName + "-apps"
	mapperEventually(t, ctx, time.Minute, "the widget's copy is in "+tenantNS, func() (bool, string) {
		w := env.targetObject(t, ctx, "east", widgetsGVR, tenantNS, "w1")
		if w == nil {
			return false, "no widget " + tenantNS + "/w1 on the target"
		}
		return w.GetAnnotations()[contract.SourceNamespaceAnnotation] == "apps", fmt.Sprintf("annotations %v", w.GetAnnotations())
	})
	if env.targetObject(t, ctx, "east", widgetsGVR, "apps", "w1") != nil {
		t.Errorf("the widget was also copied into apps, the namespace mapping's place")
	}
	w := env.targetObject(t, ctx, "east", widgetsGVR, tenantNS, "w1")
	w.Object["status"] = map[string]interface{}{"phase": "Ready"}
	if _, err := tgt.Resource(widgetsGVR).Namespace(tenantNS).UpdateStatus(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("writing the copy's status on the target: %v", err)
	}
	mapperEventually(t, ctx, time.Minute, "the copy's status is written back to the widget", func() (bool, string) {
		w, err := src.Resource(widgetsGVR).Namespace("apps").Get(ctx, "w1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		phase, _, _ := unstructured.NestedString(w.Object, "status", "phase")
		return phase == "Ready", fmt.Sprintf("widget status %v", w.Object["status"])
	})

	// mapper verify places the widget's copy by the same naming: nothing to report on widgets.
	mapperEventually(t, ctx, time.Minute, "mapper verify finds the widget's copy at its named place", func() (bool, string) {
		report := env.verifyOnce(t, "east", "--namespace-mapping=same")
		for _, v := range report.Violations {
			if v.Resource == "widgets.example.com" {
				return false, mapperReportText(report)
			}
		}
		return report.ViewObjects >= 4, mapperReportText(report)
	})

	// Gadgets: one place for two; the lower key has it, the other waits in conflict.
	mapperEventually(t, ctx, time.Minute, "g1's copy is apps/shared-east", func() (bool, string) {
		g := env.targetObject(t, ctx, "east", gadgetsGVR, "apps", "shared-east")
		if g == nil {
			return false, "no gadget apps/shared-east"
		}
		return g.GetAnnotations()[contract.SourceNameAnnotation] == "g1", fmt.Sprintf("annotations %v", g.GetAnnotations())
	})
	mapperEventually(t, ctx, time.Minute, "g2 carries the outcome record Conflict", func() (bool, string) {
		g, err := src.Resource(gadgetsGVR).Namespace("apps").Get(ctx, "g2", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		record := g.GetAnnotations()[contract.OutcomeAnnotation("east")]
		return strings.Contains(record, `"reason":"`+contract.OutcomeConflict+`"`) && strings.Contains(record, "g1"), "outcome record " + record
	})
	mapperEventually(t, ctx, 30*time.Second, "a MappingConflict Event on the target namespace", func() (bool, string) {
		events, err := env.targets["east"].Admin().Client(t).EventsV1().Events("apps").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.Reason == "MappingConflict" && e.Type == "Warning" && strings.Contains(e.Note, "g2") {
				return true, ""
			}
		}
		return false, "no such event"
	})
	mapperEventually(t, ctx, 30*time.Second, "a Warning Event Conflict regarding g2 at the source", func() (bool, string) {
		events, err := env.source.Admin().Client(t).EventsV1().Events("apps").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.Reason == contract.OutcomeConflict && e.Type == "Warning" && e.Regarding.Name == "g2" && strings.Contains(e.Note, "Location east") && strings.Contains(e.Note, "g1") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d Events in apps, none about g2's conflict", len(events.Items))
	})
	waitSyncTarget(t, ctx, src, "east", time.Minute, "status.resources names gadgets in conflict, ResourcesCompatible False naming sprockets-bad", func(st *controlv1alpha1.SyncTarget) bool {
		inConflict := false
		for _, r := range st.Status.Resources {
			if r.Resource == "gadgets.example.com" && r.Reason == controlv1alpha1.ReasonObjectsInConflict && strings.Contains(r.Message, "1 object") {
				inConflict = true
			}
		}
		c := meta.FindStatusCondition(st.Status.Conditions, controlv1alpha1.SyncTargetResourcesCompatible)
		return inConflict && c != nil && c.Status == metav1.ConditionFalse && c.Reason == controlv1alpha1.ReasonMappingsNotAccepted &&
			strings.Contains(c.Message, "sprockets-bad") && strings.Contains(c.Message, controlv1alpha1.ReasonInvalidNaming)
	})
	if g := env.targetObject(t, ctx, "east", gadgetsGVR, "apps", "shared-east"); g.GetAnnotations()[contract.SourceNameAnnotation] != "g1" {
		t.Fatalf("g2 overwrote g1's copy: %v", g.GetAnnotations())
	}

	// Sprockets: a naming that does not compile maps nothing and says so.
	mapperEventually(t, ctx, time.Minute, "sprockets-bad reports Accepted=False InvalidNaming", func() (bool, string) {
		rm, err := src.Resource(mapper.MappingResource).Get(ctx, "sprockets-bad", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(rm.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]interface{}); m["type"] == controlv1alpha1.ResourceMappingAccepted && m["status"] == "False" && m["reason"] == controlv1alpha1.ReasonInvalidNaming {
				return true, ""
			}
		}
		return false, fmt.Sprintf("status %v", rm.Object["status"])
	})
	if list, err := tgt.Resource(sprocketsGVR).List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Errorf("sprockets on the target under a naming that does not compile: %v, err %v", list, err)
	}

	// Deleting the widget deletes its copy at the named place; deleting g1 frees its place for g2.
	for _, o := range []struct {
		gvr  schema.GroupVersionResource
		name string
	}{{widgetsGVR, "w1"}, {gadgetsGVR, "g1"}} {
		if err := src.Resource(o.gvr).Namespace("apps").Delete(ctx, o.name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mapperEventually(t, ctx, time.Minute, "the deleted widget's copy is gone from "+tenantNS, func() (bool, string) {
		return env.targetObject(t, ctx, "east", widgetsGVR, tenantNS, "w1") == nil, "widget " + tenantNS + "/w1 still on the target"
	})
	mapperEventually(t, ctx, time.Minute, "g2 is mapped to apps/shared-east once g1 left", func() (bool, string) {
		g := env.targetObject(t, ctx, "east", gadgetsGVR, "apps", "shared-east")
		if g == nil {
			return false, "no gadget apps/shared-east"
		}
		return g.GetAnnotations()[contract.SourceNameAnnotation] == "g2", fmt.Sprintf("annotations %v", g.GetAnnotations())
	})

	// A lower key arriving later does not take a place whose copy is there: g2 keeps it.
	if _, err := src.Resource(gadgetsGVR).Namespace("apps").Create(ctx, reflect(newWidget(gadgetsGVR, "Gadget", "apps", "g0", "east")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mapperEventually(t, ctx, time.Minute, "g0 carries the outcome record Conflict naming g2", func() (bool, string) {
		g, err := src.Resource(gadgetsGVR).Namespace("apps").Get(ctx, "g0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		record := g.GetAnnotations()[contract.OutcomeAnnotation("east")]
		return strings.Contains(record, `"reason":"`+contract.OutcomeConflict+`"`) && strings.Contains(record, "g2"), "outcome record " + record
	})
	if g := env.targetObject(t, ctx, "east", gadgetsGVR, "apps", "shared-east"); g.GetAnnotations()[contract.SourceNameAnnotation] != "g2" {
		t.Fatalf("g0 took g2's place: %v", g.GetAnnotations())
	}
}
