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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper/verify"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// projectedGroup is the target group of TestResourceMappingProjection: a group the source
// does not serve.
const projectedGroup = "other.example"

var (
	gizmosGVR = schema.GroupVersionResource{Group: projectedGroup, Version: "v1", Resource: "gizmos"}
	cogsGVR   = schema.GroupVersionResource{Group: projectedGroup, Version: "v1", Resource: "cogs"}
)

// TestResourceMappingProjection runs a real source, mapper-apiserver, target and mapper with two
// ResourceMappings assigned to the location (docs/resourcemapping.md): widgets.example.com
// projected onto gizmos.other.example (kind Gizmo), and gadgets.example.com onto
// cogs.other.example, which the target does not serve. Widgets appear on the target as
// Gizmos with their fields as they are, follow spec changes, get the Gizmo's status written
// back, and their Gizmo is deleted when they are unassigned; the gadget is halted (its outcome
// record says ResourceNotServed) and is not written as a Gadget although the target serves
// gadgets.example.com; the accepted mapping reports Accepted=True in its status.
func TestResourceMappingProjection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := startMappingEnv(t, ctx, "widgets.example.com,gadgets.example.com", func(src, tgt dynamic.Interface) {
		createCRD(t, ctx, src, "widgets", "Widget")
		createCRD(t, ctx, src, "gadgets", "Gadget")
		createCRD(t, ctx, tgt, "gadgets", "Gadget") // served, but the mapping writes gadgets as cogs
		createCRDIn(t, ctx, tgt, projectedGroup, "gizmos", "Gizmo")
	})
	src, tgt := env.src, env.tgt["east"]

	for _, rm := range []*unstructured.Unstructured{
		newResourceMapping("widgets-as-gizmos", widgetsGVR, gizmosGVR, "Gizmo", "east"),
		newResourceMapping("gadgets-as-cogs", gadgetsGVR, cogsGVR, "Cog", "east"),
	} {
		if _, err := src.Resource(mapper.MappingResource).Create(ctx, rm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating ResourceMapping %s: %v", rm.GetName(), err)
		}
	}
	ensureNamespace(t, ctx, src, "apps")
	widget := newWidget(widgetsGVR, "Widget", "apps", "w1", "east")
	widget.SetAnnotations(map[string]string{assignedAnnotation: widget.GetAnnotations()[assignedAnnotation], contract.StatusPolicyAnnotation: contract.StatusPolicyReflect})
	if _, err := src.Resource(widgetsGVR).Namespace("apps").Create(ctx, widget, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Resource(gadgetsGVR).Namespace("apps").Create(ctx, newWidget(gadgetsGVR, "Gadget", "apps", "g1", "east"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	env.startMapper(t, "mapper-east", "east", nil, "--namespace-mapping=same")

	mapperEventually(t, ctx, time.Minute, "the widget is written as a Gizmo", func() (bool, string) {
		g := env.targetObject(t, ctx, "east", gizmosGVR, "apps", "w1")
		if g == nil {
			return false, "no gizmo apps/w1 on the target"
		}
		size, _, _ := unstructured.NestedInt64(g.Object, "spec", "size")
		if g.GetKind() != "Gizmo" || g.GetAPIVersion() != "other.example/v1" || size != 2 || g.GetLabels()[contract.LocationLabel] != "east" {
			return false, fmt.Sprintf("gizmo is %s %s, spec.size %d, labels %v", g.GetAPIVersion(), g.GetKind(), size, g.GetLabels())
		}
		return true, ""
	})

	env.mutate(t, ctx, widgetsGVR, "apps", "w1", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(7), "spec", "size")
	})
	mapperEventually(t, ctx, time.Minute, "the Gizmo follows the widget's spec", func() (bool, string) {
		g := env.targetObject(t, ctx, "east", gizmosGVR, "apps", "w1")
		size, _, _ := unstructured.NestedInt64(g.Object, "spec", "size")
		return size == 7, fmt.Sprintf("gizmo spec.size %d", size)
	})

	g := env.targetObject(t, ctx, "east", gizmosGVR, "apps", "w1")
	g.Object["status"] = map[string]interface{}{"phase": "Ready"}
	if _, err := tgt.Resource(gizmosGVR).Namespace("apps").UpdateStatus(ctx, g, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("writing the gizmo's status on the target: %v", err)
	}
	mapperEventually(t, ctx, time.Minute, "the Gizmo's status is written back to the widget", func() (bool, string) {
		w, err := src.Resource(widgetsGVR).Namespace("apps").Get(ctx, "w1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		phase, _, _ := unstructured.NestedString(w.Object, "status", "phase")
		return phase == "Ready", fmt.Sprintf("widget status %v", w.Object["status"])
	})

	mapperEventually(t, ctx, time.Minute, "the gadget is halted: its target resource is not served", func() (bool, string) {
		gd, err := src.Resource(gadgetsGVR).Namespace("apps").Get(ctx, "g1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		record := gd.GetAnnotations()[contract.OutcomeAnnotation("east")]
		return strings.Contains(record, contract.OutcomeResourceNotServed) && strings.Contains(record, "cogs.other.example"), "outcome record " + record
	})
	if env.targetObject(t, ctx, "east", gadgetsGVR, "apps", "g1") != nil {
		t.Errorf("the gadget was written as a Gadget although its mapping projects it onto cogs.other.example")
	}

	mapperEventually(t, ctx, time.Minute, "the mapping reports Accepted", func() (bool, string) {
		rm, err := src.Resource(mapper.MappingResource).Get(ctx, "widgets-as-gizmos", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(rm.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]interface{}); m["type"] == controlv1alpha1.ResourceMappingAccepted && m["status"] == "True" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("status %v", rm.Object["status"])
	})

	// mapper verify reads the same mappings: the widget's Gizmo is in sync, and the only
	// violation is the halted gadget, named by its target resource.
	var report *verify.Report
	mapperEventually(t, ctx, time.Minute, "mapper verify understands the mappings", func() (bool, string) {
		report = env.verifyOnce(t, "east", "--namespace-mapping=same")
		ok := report.Total == 1 && len(report.Violations) == 1 && report.Violations[0].Resource == "gadgets.example.com" &&
			strings.Contains(report.Violations[0].Message, "cogs") && report.ViewObjects == 2
		return ok, mapperReportText(report)
	})

	env.mutate(t, ctx, widgetsGVR, "apps", "w1", func(u *unstructured.Unstructured) { setAssignment(u) })
	mapperEventually(t, ctx, time.Minute, "the Gizmo of an unassigned widget is deleted", func() (bool, string) {
		return env.targetObject(t, ctx, "east", gizmosGVR, "apps", "w1") == nil, "gizmo apps/w1 still on the target"
	})
}

// startMappingEnv starts a source and the target of the location east, installs the
// ResourceMapping CRD in the source, runs setup with the source's and the target's dynamic
// clients (to create their CRDs), and starts mapper-apiserver mirroring resources (a
// --resources list) and the ResourceMappings. The mapper is the caller's to start
// (env.startMapper).
func startMappingEnv(t *testing.T, ctx context.Context, resources string, setup func(src, tgt dynamic.Interface)) *mapperEnv {
	t.Helper()
	cps := framework.StartControlPlanes(t, framework.ControlPlaneOptions{Name: "source"}, framework.ControlPlaneOptions{Name: "target-east"})
	source, target := cps[0], cps[1]
	src, tgt := dynamicClientFor(t, source), dynamicClientFor(t, target)
	framework.InstallControlCRD(t, ctx, source, mapper.MappingResource)
	setup(src, tgt)
	server := framework.StartMapperAPIServer(t, source,
		"--resources="+resources+",resourcemappings.control.mapper.kcp.io",
		"--source-discovery-interval=1s", "--bookmark-interval=1s", "--deletion-event-delay=1s")
	return &mapperEnv{
		source: source, server: server, src: src,
		targets: map[string]*framework.ControlPlane{"east": target}, tgt: map[string]dynamic.Interface{"east": tgt},
		viewKubeconfig:   map[string]string{"east": source.Admin().KubeconfigFor(t, server.ViewURL("east"), server.ServingCA.CertPEM)},
		targetKubeconfig: map[string]string{"east": target.AdminKubeconfig()},
		bin:              framework.BuildBinary(t, "./cmd/mapper"), owner: t,
	}
}

// newResourceMapping returns a ResourceMapping that projects source onto target (kind kind;
// an empty target: no spec.target, an identity mapping), assigned to locations and opted in
// to status write-back.
func newResourceMapping(name string, source, target schema.GroupVersionResource, kind string, locations ...string) *unstructured.Unstructured {
	spec := map[string]interface{}{"source": gvrField(source)}
	if target.Resource != "" {
		t := gvrField(target)
		t["kind"] = kind
		spec["target"] = t
	}
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": controlv1alpha1.SchemeGroupVersion.String(), "kind": "ResourceMapping",
		"metadata": map[string]interface{}{"name": name, "annotations": map[string]interface{}{contract.StatusPolicyAnnotation: contract.StatusPolicyReflect}},
		"spec":     spec,
	}}
	setAssignment(u, locations...)
	return u
}

// gvrField returns r as a ResourceMapping's group, version and resource fields.
func gvrField(r schema.GroupVersionResource) map[string]interface{} {
	return map[string]interface{}{"group": r.Group, "version": r.Version, "resource": r.Resource}
}

// createCRDIn creates the CRD of crd(plural, kind) in group instead of example.com, and waits
// until dyn serves it.
func createCRDIn(t *testing.T, ctx context.Context, dyn dynamic.Interface, group, plural, kind string) {
	t.Helper()
	c := crd(plural, kind)
	c.SetName(plural + "." + group)
	_ = unstructured.SetNestedField(c.Object, group, "spec", "group")
	if _, err := dyn.Resource(crdGVR).Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating CRD %s.%s: %v", plural, group, err)
	}
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: plural}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("CRD %s.%s not served: %v", plural, group, err)
	}
}
