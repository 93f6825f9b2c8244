package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	ctrlplacement "github.com/cluster-mapper/cluster-mapper/pkg/controller/placement"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// gadgetCRDWithName returns the Gadget CRD (crd) with a schema declaring spec.name, a string of
// at most maxLength characters.
func gadgetCRDWithName(maxLength int64) *unstructured.Unstructured {
	c := crd("gadgets", "Gadget")
	versions, _, _ := unstructured.NestedSlice(c.Object, "spec", "versions")
	versions[0].(map[string]interface{})["schema"] = map[string]interface{}{"openAPIV3Schema": map[string]interface{}{
		"type": "object",
		"properties": map[string]interface{}{"spec": map[string]interface{}{
			"type": "object", "x-kubernetes-preserve-unknown-fields": true,
			"properties": map[string]interface{}{"name": map[string]interface{}{"type": "string", "maxLength": maxLength}},
		}},
	}}
	_ = unstructured.SetNestedSlice(c.Object, versions, "spec", "versions")
	return c
}

// TestPlacementSkipsIncompatibleLocations (docs/placement.md, "Compatible locations";
// docs/locations.md, "Resource compatibility"): a Gadget CRD whose schema allows a spec.name of
// 64 characters in the source, three locations: east's target has the same CRD, north's a
// copy allowing 8 characters, west's none.
//   - each mapper reports the resource in its SyncTarget: west's ResourcesCompatible is False
//     and names gadgets.example.com (TargetLacksResource), north's names it too
//     (SchemaIncompatible, with the narrower maxLength), east's is True;
//   - a Placement selecting every location assigns its gadget to east only, and its Ready
//     condition names north and west with the resource and reason; neither is ever assigned.
func TestPlacementSkipsIncompatibleLocations(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	locations := []string{"east", "north", "west"}
	env := startLocationsEnvWith(t, ctx, "gadgets.example.com", func(dyn dynamic.Interface) {
		if _, err := dyn.Resource(crdGVR).Create(ctx, gadgetCRDWithName(64), metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating the Gadget CRD: %v", err)
		}
	}, nil, locations...)
	ensureNamespace(t, ctx, env.src, "apps")
	// north's copy of the CRD is narrower; west's is gone.
	crds := env.tgt["north"].Resource(crdGVR)
	mapperEventually(t, ctx, time.Minute, "north's Gadget CRD allows 8 characters", func() (bool, string) {
		c, err := crds.Get(ctx, "gadgets.example.com", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		versions, _, _ := unstructured.NestedSlice(gadgetCRDWithName(8).Object, "spec", "versions")
		_ = unstructured.SetNestedSlice(c.Object, versions, "spec", "versions")
		_, err = crds.Update(ctx, c, metav1.UpdateOptions{})
		return err == nil, mapperErrString(err)
	})
	if err := env.tgt["west"].Resource(crdGVR).Delete(ctx, "gadgets.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mapperEventually(t, ctx, time.Minute, "west's target no longer serves gadgets", func() (bool, string) {
		_, err := env.tgt["west"].Resource(gadgetsGVR).List(ctx, metav1.ListOptions{Limit: 1})
		return apierrors.IsNotFound(err), mapperErrString(err)
	})
	framework.StartMapperController(t, ctx, env.source, 5*time.Second)
	for _, l := range locations {
		env.startMapper(t, "mapper-"+l, l, nil, locationMapperArgs...)
	}

	compatible := func(st *controlv1alpha1.SyncTarget) *metav1.Condition {
		return meta.FindStatusCondition(st.Status.Conditions, controlv1alpha1.SyncTargetResourcesCompatible)
	}
	for l, want := range map[string]string{"west": controlv1alpha1.ReasonTargetLacksResource, "north": controlv1alpha1.ReasonSchemaIncompatible} {
		st := waitSyncTarget(t, ctx, env.dyn, l, 2*time.Minute, "Ready, and ResourcesCompatible False naming gadgets.example.com", func(st *controlv1alpha1.SyncTarget) bool {
			c := compatible(st)
			return readyIs(metav1.ConditionTrue, controlv1alpha1.ReasonMapperReady)(st) &&
				c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "gadgets.example.com")
		})
		var found bool
		for _, r := range st.Status.Resources {
			if r.Resource == "gadgets.example.com" {
				found = r.Reason == want
			}
		}
		if !found {
			t.Errorf("%s: status.resources %+v, want gadgets.example.com with reason %s", l, st.Status.Resources, want)
		}
		if c := compatible(st); !strings.Contains(c.Message, want) {
			t.Errorf("%s: ResourcesCompatible's message %q does not say %s", l, c.Message, want)
		}
	}
	if st := waitSyncTarget(t, ctx, env.dyn, "north", time.Second, "the reason names maxLength", func(*controlv1alpha1.SyncTarget) bool { return true }); !strings.Contains(compatible(st).Message, "maxLength") {
		t.Errorf("north: ResourcesCompatible's message %q does not name maxLength", compatible(st).Message)
	}
	waitSyncTarget(t, ctx, env.dyn, "east", time.Minute, "Ready and ResourcesCompatible True", func(st *controlv1alpha1.SyncTarget) bool {
		c := compatible(st)
		return readyIs(metav1.ConditionTrue, controlv1alpha1.ReasonMapperReady)(st) && c != nil && c.Status == metav1.ConditionTrue
	})

	gadgets := env.src.Resource(gadgetsGVR).Namespace("apps")
	g := newWidget(gadgetsGVR, "Gadget", "apps", "g1")
	_ = unstructured.SetNestedField(g.Object, "short", "spec", "name")
	if _, err := gadgets.Create(ctx, g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	everywhere := newPlacement("apps", "everywhere", "example.com", "v1", "gadgets", map[string]interface{}{"locationSelector": map[string]interface{}{}})
	if _, err := env.src.Resource(ctrlplacement.Resource).Namespace("apps").Create(ctx, everywhere, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAssignment(t, ctx, gadgets, "g1", `["east"]`, "everywhere")
	waitPlacementReady(t, ctx, env, "apps", "everywhere", "True, naming north and west with their reasons", func(status, msg string) bool {
		return status == "True" &&
			strings.Contains(msg, "west (gadgets.example.com: "+controlv1alpha1.ReasonTargetLacksResource+")") &&
			strings.Contains(msg, "north (gadgets.example.com: "+controlv1alpha1.ReasonSchemaIncompatible+")")
	})
	mapperEventually(t, ctx, time.Minute, "g1 is on east's target", func() (bool, string) {
		return env.targetObject(t, ctx, "east", gadgetsGVR, "apps", "g1") != nil, "absent"
	})
}
