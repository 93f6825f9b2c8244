package e2e

import (
	"context"
	"testing"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// mapperHandMade is an object created by hand on a target, which the mapper must never touch.
type mapperHandMade struct {
	location, ns, name string
	uid                string
}

// createHandMade creates an unmanaged ConfigMap on each target in each of namespaces
// (creating the namespace by hand when it does not exist).
func (e *mapperEnv) createHandMade(t *testing.T, ctx context.Context, namespaces ...string) []mapperHandMade {
	t.Helper()
	var out []mapperHandMade
	for _, l := range mapperLocations {
		for _, ns := range namespaces {
			ensureNamespace(t, ctx, e.tgt[l], ns)
			cm := &unstructured.Unstructured{Object: map[string]interface{}{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]interface{}{"name": "hand-made", "namespace": ns},
				"data":     map[string]interface{}{"made": "by hand"},
			}}
			created, err := e.tgt[l].Resource(configMapsGVR).Namespace(ns).Create(ctx, cm, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("creating a hand-made object on %s: %v", l, err)
			}
			out = append(out, mapperHandMade{location: l, ns: ns, name: "hand-made", uid: string(created.GetUID())})
		}
	}
	return out
}

// checkHandMade fails the test unless every hand-made object still exists unchanged.
func (e *mapperEnv) checkHandMade(t *testing.T, ctx context.Context, step string, objs []mapperHandMade) {
	t.Helper()
	for _, h := range objs {
		obj := e.targetObject(t, ctx, h.location, configMapsGVR, h.ns, h.name)
		switch {
		case obj == nil:
			t.Fatalf("after %s the hand-made object %s/%s on %s is gone", step, h.ns, h.name, h.location)
		case string(obj.GetUID()) != h.uid:
			t.Fatalf("after %s the hand-made object %s/%s on %s was re-created", step, h.ns, h.name, h.location)
		case obj.GetLabels()[contract.LocationLabel] != "" || obj.Object["data"].(map[string]interface{})["made"] != "by hand":
			t.Fatalf("after %s the hand-made object %s/%s on %s was changed: %v", step, h.ns, h.name, h.location, obj.Object)
		}
	}
}

// only returns the keys of gvr assigned to location and to no other location, in namespace ns.
func (e *mapperEnv) only(t *testing.T, ctx context.Context, gvr schema.GroupVersionResource, location, ns string) sets.Set[string] {
	t.Helper()
	out := groundTruth(t, ctx, e.src, gvr, location, ns)
	for _, other := range mapperLocations {
		if other != location {
			out = out.Difference(groundTruth(t, ctx, e.src, gvr, other, ns))
		}
	}
	return out
}

// present fails the test unless ns/name of gvr exists (want) or not (!want) on location's
// target.
func (e *mapperEnv) present(t *testing.T, ctx context.Context, step, location string, gvr schema.GroupVersionResource, key string, want bool) *unstructured.Unstructured {
	t.Helper()
	ns, name := mapperSplitKey(key)
	obj := e.targetObject(t, ctx, location, gvr, ns, name)
	if (obj != nil) != want {
		t.Fatalf("after %s: %s %s on %s: present=%v, want %v", step, gvr.Resource, key, location, obj != nil, want)
	}
	return obj
}

// testMapperSequence runs the scripted sequence: each step changes the source, then both
// locations must converge (verify reports nothing), the step's effect must be visible on the
// targets, and the hand-made objects must be untouched.
func testMapperSequence(t *testing.T, ctx context.Context, env *mapperEnv) {
	hand := env.createHandMade(t, ctx, "team-a", "team-d")
	env.converge(t, ctx, "creating hand-made objects", mapperLocations...)
	env.checkHandMade(t, ctx, "creating hand-made objects", hand)
	done := func(step string) {
		t.Helper()
		env.converge(t, ctx, step, mapperLocations...)
		env.checkHandMade(t, ctx, step, hand)
	}
	create := func(gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
		t.Helper()
		if _, err := env.src.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	step := "a copy deleted on the target"
	restored := mapperSortedKeys(env.only(t, ctx, mapperSecretsGVR, "east", "team-a"), 1)[0]
	before := env.present(t, ctx, "before "+step, "east", mapperSecretsGVR, restored, true)
	if err := env.tgt["east"].Resource(mapperSecretsGVR).Namespace(before.GetNamespace()).Delete(ctx, before.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	done(step)
	if after := env.present(t, ctx, step, "east", mapperSecretsGVR, restored, true); after.GetUID() == before.GetUID() {
		t.Fatalf("after %s: the copy was not deleted", step)
	}

	step = "assign"
	create(configMapsGVR, decorateFixture(newConfigMap("team-a", "seq-new-cm", "east"), false))
	create(deploymentsGVR, decorateFixture(newDeployment("team-b", "seq-new-deploy", "west"), false))
	create(widgetsGVR, decorateFixture(newWidget(widgetsGVR, "Widget", "team-c", "seq-new-widget", "east", "west"), false))
	done(step)
	env.present(t, ctx, step, "east", configMapsGVR, "team-a/seq-new-cm", true)
	env.present(t, ctx, step, "west", configMapsGVR, "team-a/seq-new-cm", false)
	env.present(t, ctx, step, "west", deploymentsGVR, "team-b/seq-new-deploy", true)
	env.present(t, ctx, step, "east", widgetsGVR, "team-c/seq-new-widget", true)
	env.present(t, ctx, step, "west", widgetsGVR, "team-c/seq-new-widget", true)

	step = "unassign"
	unassigned := mapperSortedKeys(env.only(t, ctx, configMapsGVR, "east", "team-b"), 3)
	for _, k := range unassigned {
		env.present(t, ctx, "before "+step, "east", configMapsGVR, k, true)
		ns, name := mapperSplitKey(k)
		env.mutate(t, ctx, configMapsGVR, ns, name, func(u *unstructured.Unstructured) { setAssignment(u) })
	}
	done(step)
	for _, k := range unassigned {
		env.present(t, ctx, step, "east", configMapsGVR, k, false)
	}

	step = "re-assign to the other location"
	moved := mapperSortedKeys(env.only(t, ctx, deploymentsGVR, "east", "team-c"), 3)
	for _, k := range moved {
		ns, name := mapperSplitKey(k)
		env.mutate(t, ctx, deploymentsGVR, ns, name, func(u *unstructured.Unstructured) { setAssignment(u, "west") })
	}
	done(step)
	for _, k := range moved {
		env.present(t, ctx, step, "east", deploymentsGVR, k, false)
		env.present(t, ctx, step, "west", deploymentsGVR, k, true)
	}

	step = "spec edits"
	cmKey := mapperSortedKeys(env.only(t, ctx, configMapsGVR, "east", "team-a"), 1)[0]
	deployKey := mapperSortedKeys(env.only(t, ctx, deploymentsGVR, "east", "team-a"), 1)[0]
	widgetKey := mapperSortedKeys(groundTruth(t, ctx, env.src, widgetsGVR, "west", "team-b"), 1)[0]
	svcKey := mapperSortedKeys(groundTruth(t, ctx, env.src, mapperServicesGVR, "west", "team-b"), 1)[0]
	edit := func(gvr schema.GroupVersionResource, key string, change func(*unstructured.Unstructured)) {
		ns, name := mapperSplitKey(key)
		env.mutate(t, ctx, gvr, ns, name, change)
	}
	edit(configMapsGVR, cmKey, func(u *unstructured.Unstructured) {
		u.Object["data"] = map[string]interface{}{"new": "v2"} // drops "key"
	})
	edit(deploymentsGVR, deployKey, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(3), "spec", "replicas")
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		containers[0].(map[string]interface{})["image"] = "registry.invalid/app:2"
		_ = unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers")
	})
	edit(widgetsGVR, widgetKey, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(99), "spec", "size")
	})
	edit(mapperServicesGVR, svcKey, func(u *unstructured.Unstructured) {
		ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "ports")
		ports[0].(map[string]interface{})["port"] = int64(81)
		_ = unstructured.SetNestedSlice(u.Object, ports, "spec", "ports")
	})
	done(step)
	if cm := env.present(t, ctx, step, "east", configMapsGVR, cmKey, true); !mapperMapsEqual(cm.Object["data"], map[string]interface{}{"new": "v2"}) {
		t.Errorf("after %s: the target ConfigMap's data is %v, want exactly {new: v2}", step, cm.Object["data"])
	}
	d := env.present(t, ctx, step, "east", deploymentsGVR, deployKey, true)
	replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if replicas != 3 || containers[0].(map[string]interface{})["image"] != "registry.invalid/app:2" {
		t.Errorf("after %s: the target Deployment has replicas %d and containers %v", step, replicas, containers)
	}
	w := env.present(t, ctx, step, "west", widgetsGVR, widgetKey, true)
	if size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size"); size != 99 {
		t.Errorf("after %s: the target Widget's spec.size is %d, want 99", step, size)
	}
	s := env.present(t, ctx, step, "west", mapperServicesGVR, svcKey, true)
	if ports, _, _ := unstructured.NestedSlice(s.Object, "spec", "ports"); len(ports) != 1 || ports[0].(map[string]interface{})["port"] != int64(81) {
		t.Errorf("after %s: the target Service's ports are %v, want port 81 only", step, ports)
	}

	step = "label and annotation removal upstream"
	stripped := mapperSortedKeys(groundTruth(t, ctx, env.src, mapperSecretsGVR, "west", "team-c"), 2)
	for _, k := range stripped {
		edit(mapperSecretsGVR, k, func(u *unstructured.Unstructured) {
			l, a := u.GetLabels(), u.GetAnnotations()
			delete(l, fixtureTierLabel)
			delete(a, fixtureOwnerAnnotation)
			u.SetLabels(l)
			u.SetAnnotations(a)
		})
	}
	done(step)
	for _, k := range stripped {
		obj := env.present(t, ctx, step, "west", mapperSecretsGVR, k, true)
		if _, ok := obj.GetLabels()[fixtureTierLabel]; ok {
			t.Errorf("after %s: the target Secret %s still has the label %s", step, k, fixtureTierLabel)
		}
		if _, ok := obj.GetAnnotations()[fixtureOwnerAnnotation]; ok {
			t.Errorf("after %s: the target Secret %s still has the annotation %s", step, k, fixtureOwnerAnnotation)
		}
	}

	step = "source deletion"
	deletedCMs := mapperSortedKeys(groundTruth(t, ctx, env.src, configMapsGVR, "east", "team-c"), 3)
	deletedWidgets := mapperSortedKeys(groundTruth(t, ctx, env.src, widgetsGVR, "west", "team-c"), 2)
	for gvr, keys := range map[schema.GroupVersionResource][]string{configMapsGVR: deletedCMs, widgetsGVR: deletedWidgets} {
		for _, k := range keys {
			ns, name := mapperSplitKey(k)
			if err := env.src.Resource(gvr).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	done(step)
	for _, k := range deletedCMs {
		env.present(t, ctx, step, "east", configMapsGVR, k, false)
	}
	for _, k := range deletedWidgets {
		env.present(t, ctx, step, "west", widgetsGVR, k, false)
	}

	step = "namespace deletion"
	// The test source has no namespace controller: delete the namespace, then its contents,
	// as the controller would.
	if err := env.src.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Delete(ctx, "team-d", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, gvr := range mappedGVRs {
		if err := env.src.Resource(gvr).Namespace("team-d").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatalf("deleting the %s of team-d: %v", gvr.Resource, err)
		}
	}
	done(step)
	for _, l := range mapperLocations {
		for _, gvr := range mappedGVRs {
			for k := range mapperTargetUIDs(t, ctx, env.tgt[l], gvr, l) {
				if ns, _ := mapperSplitKey(k); ns == "team-d" {
					t.Errorf("after %s: %s %s is still on %s", step, gvr.Resource, k, l)
				}
			}
		}
	}
}

// mapperMapsEqual compares two JSON maps.
func mapperMapsEqual(a, b interface{}) bool {
	am, _ := a.(map[string]interface{})
	bm, _ := b.(map[string]interface{})
	if len(am) != len(bm) {
		return false
	}
	for k, v := range am {
		if bm[k] != v {
			return false
		}
	}
	return true
}
