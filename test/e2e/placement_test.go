package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	ctrlplacement "github.com/cluster-mapper/cluster-mapper/pkg/controller/placement"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// newPlacement returns a Placement of namespace ns placing objects of resource (group,
// version, resource) with spec's other fields.
func newPlacement(ns, name, group, version, resource string, spec map[string]interface{}) *unstructured.Unstructured {
	spec["resources"] = []interface{}{map[string]interface{}{
		"apiGroups": []interface{}{group}, "apiVersions": []interface{}{version}, "resources": []interface{}{resource},
	}}
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "control.mapper.kcp.io/v1alpha1", "kind": "Placement",
		"metadata": map[string]interface{}{"name": name, "namespace": ns},
		"spec":     spec,
	}}
}

// assignment returns an object's kcp.io/assigned-locations and placement owner.
func assignment(u *unstructured.Unstructured) (locations, owner string) {
	return u.GetAnnotations()[contract.AssignedLocationsAnnotation], u.GetAnnotations()[ctrlplacement.OwnerAnnotation]
}

// placementState describes the Placement ns/name's Ready condition and the assignment of
// the object ns/object of gvr, for failure messages.
func placementState(ctx context.Context, env *locationsEnv, ns, name string, gvr schema.GroupVersionResource, object string) string {
	var out []string
	if pl, err := env.src.Resource(ctrlplacement.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		out = append(out, err.Error())
	} else {
		conds, _, _ := unstructured.NestedSlice(pl.Object, "status", "conditions")
		out = append(out, fmt.Sprintf("Placement %s: %v", name, conds))
	}
	if u, err := env.src.Resource(gvr).Namespace(ns).Get(ctx, object, metav1.GetOptions{}); err != nil {
		out = append(out, err.Error())
	} else {
		out = append(out, fmt.Sprintf("%s annotations: %v", object, u.GetAnnotations()))
	}
	return strings.Join(out, "; ")
}

// waitPlacementReady waits (a minute at most) until the Ready condition of the Placement
// ns/name satisfies cond (its status and message).
func waitPlacementReady(t *testing.T, ctx context.Context, env *locationsEnv, ns, name, what string, cond func(status, message string) bool) {
	t.Helper()
	mapperEventually(t, ctx, time.Minute, "the Placement's Ready condition: "+what, func() (bool, string) {
		u, err := env.src.Resource(ctrlplacement.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]interface{}); ok && m["type"] == "Ready" {
				status, msg := fmt.Sprint(m["status"]), fmt.Sprint(m["message"])
				return cond(status, msg), status + ": " + msg
			}
		}
		return false, "no Ready condition"
	})
}

// waitAssignment waits (a minute at most) until the object name of objects is assigned to
// locations (the annotation's value) by the Placement owner.
func waitAssignment(t *testing.T, ctx context.Context, objects dynamic.ResourceInterface, name, locations, owner string) {
	t.Helper()
	mapperEventually(t, ctx, time.Minute, fmt.Sprintf("%s assigned to %s by %s", name, locations, owner), func() (bool, string) {
		u, err := objects.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		locs, by := assignment(u)
		return locs == locations && by == owner, locs + " by " + by
	})
}

// TestPlacement (docs/placement.md) on real servers: four locations with real targets, each
// with kube-controller-manager and a mapper, and mapper-controller.
//   - A Deployment of 10 replicas divided over the three region=eu|us locations runs 4/3/3 on
//     their targets, and the source's status sums their deployment controllers' reports.
//   - Stopping one location's mapper: after the tolerance the others run 5/5; when the mapper
//     returns, its copy is removed (an ordinary unassignment), and only once the tolerance has
//     passed since the move does the location take replicas again.
//   - A fourth matching location appears: the split rebalances to 3/3/2/2.
//   - numberOfLocations: 2 over five locations, spreadBy: Object: when one leaves, only its
//     objects move.
//   - kcp mode (objects and Placements carrying kcp.io/cluster): a Placement places only the
//     objects of its own logical cluster.
//   - Two Placements selecting the same objects: the older places them, both statuses show the
//     conflict; a hand-assigned object is left alone; deleting a Placement removes the
//     assignments it wrote; unchanged inputs write nothing (the controller's write metric).
func TestPlacement(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	locations := []string{"east", "north", "west", "south"}
	env := startLocationsEnvFor(t, ctx, "deployments.apps", locations...)
	ensureNamespace(t, ctx, env.src, "apps")
	for l, r := range map[string]string{"east": "eu", "north": "eu", "west": "us", "south": "later"} {
		setRegion(t, ctx, env, l, r)
	}
	for _, l := range locations {
		env.targets[l].StartControllerManager(t)
	}
	metricsPort, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", metricsPort)
	framework.StartMapperController(t, ctx, env.source, 5*time.Second, "--bind-address="+metricsAddr)
	ctrl := &mapperProc{name: "mapper-controller", metricsAddr: metricsAddr, owner: t} // its /metrics
	mappers := map[string]*mapperProc{}
	for _, l := range locations {
		mappers[l] = env.startMapper(t, "mapper-"+l, l, nil, locationMapperArgs...)
	}
	placements := env.src.Resource(ctrlplacement.Resource).Namespace("apps")
	deployments := env.src.Resource(deploymentsGVR).Namespace("apps")

	web := newDeployment("apps", "web")
	web.SetLabels(map[string]string{"app": "web"})
	web.Object["spec"].(map[string]interface{})["replicas"] = int64(10)
	if _, err := deployments.Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// anchor, assigned by hand everywhere, keeps every view non-empty: a mapper never sweeps
	// orphans from an empty view (docs/mapper.md), so without it west would keep web's copy
	// once web moves away.
	if _, err := deployments.Create(ctx, newDeployment("apps", "anchor", locations...), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	split := newPlacement("apps", "split", "apps", "v1", "deployments", map[string]interface{}{
		"objectSelector":    map[string]interface{}{"matchLabels": map[string]interface{}{"app": "web"}},
		"locationSelector":  map[string]interface{}{"matchExpressions": []interface{}{map[string]interface{}{"key": "region", "operator": "In", "values": []interface{}{"eu", "us"}}}},
		"replicas":          "Divide",
		"notReadyTolerance": "30s",
	})
	if _, err := placements.Create(ctx, split, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// split returns the replicas of web on each target ("-" where absent), in locations' order.
	splitOnTargets := func() string {
		var parts []string
		for _, l := range locations {
			obj := env.targetObject(t, ctx, l, deploymentsGVR, "apps", "web")
			if obj == nil {
				parts = append(parts, "-")
				continue
			}
			r, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
			parts = append(parts, fmt.Sprint(r))
		}
		return strings.Join(parts, "/")
	}
	waitSplit := func(t *testing.T, timeout time.Duration, want ...string) string {
		t.Helper()
		var got string
		mapperEventually(t, ctx, timeout, fmt.Sprintf("web's replicas on east/north/west/south are one of %v", want), func() (bool, string) {
			got = splitOnTargets()
			return slices.Contains(want, got), got + " (source: " + placementState(ctx, env, "apps", "split", deploymentsGVR, "web") + ")"
		})
		return got
	}
	// The split of 10 over three is 4/3/3 with the remainder at the first location in
	// web's rendezvous order: any of the three.
	first := waitSplit(t, 2*time.Minute, "4/3/3/-", "3/4/3/-", "3/3/4/-")

	t.Run("the source's status sums the targets'", func(t *testing.T) {
		mapperEventually(t, ctx, 2*time.Minute, "the source's web reports 10 replicas", func() (bool, string) {
			src, err := deployments.Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			r, _, _ := unstructured.NestedInt64(src.Object, "status", "replicas")
			u, _, _ := unstructured.NestedInt64(src.Object, "status", "updatedReplicas")
			return r == 10 && u == 10, fmt.Sprintf("replicas=%d updated=%d", r, u)
		})
		pl, err := placements.Get(ctx, "split", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		locs, _, _ := unstructured.NestedStringSlice(pl.Object, "status", "locations")
		if fmt.Sprint(locs) != "[east north west]" {
			t.Errorf("status.locations %v", locs)
		}
		out, err := framework.RunKubectl(t, env.source.AdminKubeconfig(), "get", "placements", "-n", "apps")
		if err != nil || !strings.Contains(string(out), "Divide") || !strings.Contains(string(out), "Placed") {
			t.Errorf("kubectl get placements: %v\n%s", err, out)
		}
	})

	t.Run("a stopped location's replicas move after the tolerance, and its copy goes when it returns", func(t *testing.T) {
		if err := mappers["west"].proc.Stop(); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		// west's copy stays as it was while its mapper is away.
		waitSplit(t, 2*time.Minute, "5/5/"+strings.Split(first, "/")[2]+"/-")
		if moved := time.Since(stopped); moved < 28*time.Second { // the Ready condition's time has one-second precision
			t.Errorf("replicas moved %s after west's mapper stopped, before the 30s tolerance", moved)
		}
		mappers["west"].restart()
		// The mapper returns to a view without web: it removes its copy; only 30s after the
		// move does west take replicas again.
		waitSplit(t, time.Minute, "5/5/-/-")
		waitSplit(t, 2*time.Minute, "4/3/3/-", "3/4/3/-", "3/3/4/-")
	})

	t.Run("a fourth matching location takes its share", func(t *testing.T) {
		setRegion(t, ctx, env, "south", "eu")
		waitSplit(t, 2*time.Minute, "3/3/2/2", "3/2/3/2", "3/2/2/3", "2/3/3/2", "2/3/2/3", "2/2/3/3")
	})

	t.Run("numberOfLocations 2 of 5: only the leaving location's objects move", func(t *testing.T) {
		ensureNamespace(t, ctx, env.src, "pairs")
		pairs := []string{"p1", "p2", "p3", "p4", "p5"}
		for _, l := range pairs {
			if _, err := env.dyn.Resource(synctarget.Resource).Create(ctx, newSyncTarget(l, map[string]string{"tier": "pair"}), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// These SyncTargets have no mappers: a heartbeat run here reports them Ready (work goes
		// only to Ready locations).
		for _, l := range pairs {
			reportReady(t, ctx, env.source, env.dyn, l)
		}
		cms := env.src.Resource(configMapsGVR).Namespace("pairs")
		for i := range 30 {
			if _, err := cms.Create(ctx, newConfigMap("pairs", fmt.Sprintf("cm-%02d", i)), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// Each ConfigMap on its own (spreadBy: Object): the test is about how objects spread.
		if _, err := env.src.Resource(ctrlplacement.Resource).Namespace("pairs").Create(ctx, newPlacement("pairs", "pairs", "", "v1", "configmaps", map[string]interface{}{
			"locationSelector":  map[string]interface{}{"matchLabels": map[string]interface{}{"tier": "pair"}},
			"numberOfLocations": int64(2),
			"notReadyTolerance": "1h",
			"spreadBy":          "Object",
		}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		before := map[string]string{}
		mapperEventually(t, ctx, time.Minute, "30 ConfigMaps placed on 2 locations each", func() (bool, string) {
			list, err := cms.List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, cm := range list.Items {
				locs, owner := assignment(&cm)
				if owner != "pairs" || strings.Count(locs, ",") != 1 {
					return false, fmt.Sprintf("%s: %s by %q", cm.GetName(), locs, owner)
				}
				before[cm.GetName()] = locs
			}
			return len(before) == 30, fmt.Sprintf("%d placed", len(before))
		})
		onP3 := 0
		for _, locs := range before {
			if strings.Contains(locs, `"p3"`) {
				onP3++
			}
		}
		if onP3 == 0 || onP3 == 30 {
			t.Fatalf("%d of 30 ConfigMaps on p3: the rendezvous hash does not spread", onP3)
		}
		if _, err := env.dyn.Resource(synctarget.Resource).Patch(ctx, "p3", types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"gone"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		mapperEventually(t, ctx, time.Minute, "p3's ConfigMaps moved, the others stayed", func() (bool, string) {
			list, err := cms.List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, cm := range list.Items {
				locs, _ := assignment(&cm)
				was := before[cm.GetName()]
				switch {
				case strings.Contains(locs, `"p3"`) || strings.Count(locs, ",") != 1:
					return false, fmt.Sprintf("%s still %s", cm.GetName(), locs)
				case !strings.Contains(was, `"p3"`) && locs != was:
					t.Fatalf("%s moved from %s to %s although it was not on p3", cm.GetName(), was, locs)
				}
			}
			return true, ""
		})
	})

	t.Run("kcp mode: a Placement places only the objects of its logical cluster", func(t *testing.T) {
		ensureNamespace(t, ctx, env.src, "tenants")
		cms := env.src.Resource(configMapsGVR).Namespace("tenants")
		for _, c := range []string{"tenant-a", "tenant-b"} {
			cm := newConfigMap("tenants", "cm-"+c)
			cm.SetAnnotations(map[string]string{contract.ClusterAnnotation: c})
			if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		pl := newPlacement("tenants", "spread", "", "v1", "configmaps", map[string]interface{}{"locationNames": []interface{}{"east"}})
		pl.SetAnnotations(map[string]string{contract.ClusterAnnotation: "tenant-a"})
		if _, err := env.src.Resource(ctrlplacement.Resource).Namespace("tenants").Create(ctx, pl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitAssignment(t, ctx, cms, "cm-tenant-a", `["east"]`, "spread")
		// The Placement's status is written after its objects: once it counts one object,
		// tenant-b's would have been written too had it been selected.
		mapperEventually(t, ctx, time.Minute, "the Placement counts one placed object", func() (bool, string) {
			u, err := env.src.Resource(ctrlplacement.Resource).Namespace("tenants").Get(ctx, "spread", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			n, _, _ := unstructured.NestedInt64(u.Object, "status", "placedObjects")
			return n == 1, fmt.Sprint(n)
		})
		cm, err := cms.Get(ctx, "cm-tenant-b", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if locs, owner := assignment(cm); locs != "" || owner != "" {
			t.Errorf("tenant-b's ConfigMap was placed by tenant-a's Placement: %s by %q", locs, owner)
		}
	})

	t.Run("conflicts, a hand-assigned object, deletion", func(t *testing.T) {
		ensureNamespace(t, ctx, env.src, "shared")
		cms := env.src.Resource(configMapsGVR).Namespace("shared")
		for _, name := range []string{"a", "b"} {
			cm := newConfigMap("shared", name)
			cm.SetLabels(map[string]string{"team": "x"})
			if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		hand := newConfigMap("shared", "by-hand", "east")
		hand.SetLabels(map[string]string{"team": "x"})
		if _, err := cms.Create(ctx, hand, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pls := env.src.Resource(ctrlplacement.Resource).Namespace("shared")
		spec := func(names ...interface{}) map[string]interface{} {
			return map[string]interface{}{
				"objectSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"team": "x"}},
				"locationNames":  names,
			}
		}
		if _, err := pls.Create(ctx, newPlacement("shared", "older", "", "v1", "configmaps", spec("east", "north")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// creationTimestamp has one-second precision: make the second Placement younger.
		time.Sleep(1100 * time.Millisecond)
		if _, err := pls.Create(ctx, newPlacement("shared", "younger", "", "v1", "configmaps", spec("west")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		conflicts := func(name string) string {
			pl, err := pls.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			list, _, _ := unstructured.NestedSlice(pl.Object, "status", "conflicts")
			var out []string
			for _, c := range list {
				m := c.(map[string]interface{})
				out = append(out, fmt.Sprintf("%s:%s", m["name"], m["reason"]))
			}
			reason := ""
			if conds, _, _ := unstructured.NestedSlice(pl.Object, "status", "conditions"); len(conds) > 0 {
				reason = fmt.Sprint(conds[0].(map[string]interface{})["reason"])
			}
			return reason + " " + strings.Join(out, ",")
		}
		mapperEventually(t, ctx, time.Minute, "both Placements report the conflicts", func() (bool, string) {
			o, y := conflicts("older"), conflicts("younger")
			return o == "Conflicts a:YoungerPlacement,b:YoungerPlacement,by-hand:AssignedByOther" &&
				y == "Conflicts a:OlderPlacement,b:OlderPlacement,by-hand:AssignedByOther", o + " | " + y
		})
		for _, name := range []string{"a", "b"} {
			cm, err := cms.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if locs, owner := assignment(cm); locs != `["east","north"]` || owner != "older" {
				t.Errorf("%s: %s by %q, want the older Placement's east and north", name, locs, owner)
			}
		}
		cm, err := cms.Get(ctx, "by-hand", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if locs, owner := assignment(cm); locs != `["east"]` || owner != "" {
			t.Errorf("the hand-assigned object became %s by %q", locs, owner)
		}

		// Unchanged inputs write nothing: relabelling an unrelated SyncTarget re-reconciles
		// every namespace, and no object write follows.
		writes := func() float64 {
			v, _ := ctrl.metric("mapper_controller_placement_object_writes_total", `kind="Assign"`, `result="Written"`)
			return v
		}
		reconciled := func() float64 {
			v, _ := ctrl.metric("workqueue_adds_total", `name="placement"`)
			return v
		}
		w0, r0 := writes(), reconciled()
		if _, err := env.dyn.Resource(synctarget.Resource).Patch(ctx, "p1", types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		mapperEventually(t, ctx, 30*time.Second, "the placement queue takes the SyncTarget change", func() (bool, string) {
			return reconciled() > r0, fmt.Sprint(reconciled())
		})
		// Every counted add is processed once: wait until the processings catch up.
		mapperEventually(t, ctx, 30*time.Second, "the placement queue has processed its adds", func() (bool, string) {
			done, _ := ctrl.metric("workqueue_work_duration_seconds_count", `name="placement"`)
			adds := reconciled()
			return done >= adds, fmt.Sprintf("%v of %v", done, adds)
		})
		if w := writes(); w != w0 {
			t.Errorf("unchanged placements wrote %v objects", w-w0)
		}

		// Deleting the older Placement: the younger one takes its objects over; deleting the
		// younger removes the assignments it wrote; the hand-assigned object keeps its own.
		if err := pls.Delete(ctx, "older", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitAssignment(t, ctx, cms, "a", `["west"]`, "younger")
		if err := pls.Delete(ctx, "younger", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		mapperEventually(t, ctx, time.Minute, "the Placement is gone and its assignments with it", func() (bool, string) {
			if _, err := pls.Get(ctx, "younger", metav1.GetOptions{}); err == nil {
				return false, "the Placement still exists"
			}
			for _, name := range []string{"a", "b"} {
				cm, err := cms.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				if locs, owner := assignment(cm); locs != "" || owner != "" {
					return false, fmt.Sprintf("%s: %s by %q", name, locs, owner)
				}
			}
			return true, ""
		})
		if cm, err := cms.Get(ctx, "by-hand", metav1.GetOptions{}); err != nil || cm.GetAnnotations()[contract.AssignedLocationsAnnotation] != `["east"]` {
			t.Errorf("the hand-assigned object after the deletions: %v %v", err, cm)
		}
	})
}
