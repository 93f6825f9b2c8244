package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestResourceMappingRelatedTarget runs a real source, mapper-apiserver, two targets (east and
// west) and their mappers with a ResourceMapping that projects widgets.example.com onto
// gizmos.other.example and brings up, per location, the Secret "<gizmo>-credentials" that an
// operator on the target writes for each Gizmo (docs/resourcemapping.md, "Related objects:
// origin Target"). The test's operator is an informer on each target's gizmos. Each location's
// Secret appears in the widget's namespace as w1-credentials-<location>, with the target's data,
// the marks of a related copy and an ownerReference to the widget; a change of the target
// Secret flows up; the related copy is not copied back down; a location cannot create an arbitrary object through its view nor delete
// another location's copy; unassigning west removes west's copy only; deleting the widget
// removes east's (no garbage collector runs in these control planes: the mapper deletes it).
func TestResourceMappingRelatedTarget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	locations := []string{"east", "west"}
	shared := framework.StartEtcd(t)
	cps := framework.StartControlPlanes(t, framework.ControlPlaneOptions{Name: "source"},
		framework.ControlPlaneOptions{Name: "target-east", Etcd: shared}, framework.ControlPlaneOptions{Name: "target-west", Etcd: shared})
	source := cps[0]
	src := dynamicClientFor(t, source)
	framework.InstallControlCRD(t, ctx, source, mapper.MappingResource)
	createCRD(t, ctx, src, "widgets", "Widget")
	server := framework.StartMapperAPIServer(t, source,
		"--resources=widgets.example.com,secrets,resourcemappings.control.mapper.kcp.io",
		"--source-discovery-interval=1s", "--bookmark-interval=1s", "--deletion-event-delay=1s")
	env := &mapperEnv{
		source: source, server: server, src: src,
		targets: map[string]*framework.ControlPlane{}, tgt: map[string]dynamic.Interface{},
		viewKubeconfig: map[string]string{}, targetKubeconfig: map[string]string{},
		bin: framework.BuildBinary(t, "./cmd/mapper"), owner: t,
	}
	for i, l := range locations {
		env.targets[l] = cps[i+1]
		env.tgt[l] = dynamicClientFor(t, cps[i+1])
		env.targetKubeconfig[l] = cps[i+1].AdminKubeconfig()
		env.viewKubeconfig[l] = source.Admin().KubeconfigFor(t, server.ViewURL(l), server.ServingCA.CertPEM)
		createCRDIn(t, ctx, env.tgt[l], projectedGroup, "gizmos", "Gizmo")
		runCredentialsOperator(t, ctx, env.tgt[l], l)
	}

	rm := newResourceMapping("widgets-as-gizmos", widgetsGVR, gizmosGVR, "Gizmo", locations...)
	_ = unstructured.SetNestedSlice(rm.Object, []interface{}{map[string]interface{}{
		"identifier": "credentials", "origin": "Target",
		"resource": map[string]interface{}{"group": "", "version": "v1", "resource": "secrets"},
		"object":   map[string]interface{}{"name": `object.metadata.name + "-credentials"`},
	}}, "spec", "related")
	if _, err := src.Resource(mapper.MappingResource).Create(ctx, rm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the ResourceMapping: %v", err)
	}
	ensureNamespace(t, ctx, src, "apps")
	widget, err := src.Resource(widgetsGVR).Namespace("apps").Create(ctx, newWidget(widgetsGVR, "Widget", "apps", "w1", locations...), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mappers := map[string]*mapperProc{}
	for _, l := range locations {
		mappers[l] = env.startMapper(t, "mapper-"+l, l, nil, "--namespace-mapping=same")
	}

	// Each location's Secret is brought up, with its own data.
	for _, l := range locations {
		awaitRelatedCopy(t, ctx, src, "w1-credentials-"+l, func(s *unstructured.Unstructured) string {
			labels := s.GetLabels()
			refs := s.GetOwnerReferences()
			switch {
			case secretValue(s, "location") != l:
				return fmt.Sprintf("data %v", s.Object["data"])
			case labels[contract.RelatedLocationLabel] != l || labels[contract.RelatedOwnerUIDLabel] != string(widget.GetUID()) || labels[contract.RelatedIdentifierLabel] != "credentials":
				return fmt.Sprintf("labels %v", labels)
			case s.GetAnnotations()[contract.RelatedMappingAnnotation] != "widgets-as-gizmos":
				return fmt.Sprintf("annotations %v", s.GetAnnotations())
			case len(refs) != 1 || refs[0].UID != widget.GetUID() || refs[0].Kind != "Widget":
				return fmt.Sprintf("ownerReferences %v", refs)
			}
			return ""
		})
	}

	if n := mappers["east"].metricTotal("mapper_related_copy_writes_total", `operation="create"`, `result="success"`); n < 1 {
		t.Errorf("east's mapper_related_copy_writes_total{operation=create,result=success} is %v, want at least 1", n)
	}

	// A change of the target's Secret flows up.
	east := env.tgt["east"].Resource(secretsGVR).Namespace("apps")
	sec, err := east.Get(ctx, "w1-credentials", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(sec.Object, base64.StdEncoding.EncodeToString([]byte("rotated")), "data", "password")
	if _, err := east.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitRelatedCopy(t, ctx, src, "w1-credentials-east", func(s *unstructured.Unstructured) string {
		if v := secretValue(s, "password"); v != "rotated" {
			return "password " + v
		}
		return ""
	})

	// East's view shows east's related copy and east's mapper maps secrets, and it never copies
	// a related copy down onto its target (by now its view informer has held it for as long as
	// the rotation took to flow up).
	if obj := env.targetObject(t, ctx, "east", secretsGVR, "apps", "w1-credentials-east"); obj != nil {
		t.Errorf("east's related copy was copied down onto east's target: labels %v", obj.GetLabels())
	}

	// A location writes through its view only its own related copies.
	view, err := dynamic.NewForConfig(server.ViewConfig(source.Admin(), "east"))
	if err != nil {
		t.Fatal(err)
	}
	viewSecrets := view.Resource(secretsGVR).Namespace("apps")
	plain := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]interface{}{"name": "arbitrary", "namespace": "apps"}}}
	if _, err := viewSecrets.Create(ctx, plain, metav1.CreateOptions{}); apierrors.ReasonForError(err) != metav1.StatusReasonMethodNotAllowed && !apierrors.IsForbidden(err) {
		t.Errorf("creating an arbitrary Secret through east's view: %v, want 405 or 403", err)
	}
	if err := viewSecrets.Delete(ctx, "w1-credentials-west", metav1.DeleteOptions{}); err == nil {
		t.Errorf("deleting west's related copy through east's view succeeded, want a refusal")
	}
	if _, err := src.Resource(secretsGVR).Namespace("apps").Get(ctx, "w1-credentials-west", metav1.GetOptions{}); err != nil {
		t.Errorf("west's related copy after east tried to delete it: %v", err)
	}
	if _, err := src.Resource(secretsGVR).Namespace("apps").Get(ctx, "arbitrary", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the arbitrary Secret east tried to create: %v, want NotFound", err)
	}

	// Unassigning west removes west's copy, and only it.
	env.mutate(t, ctx, widgetsGVR, "apps", "w1", func(u *unstructured.Unstructured) { setAssignment(u, "east") })
	awaitRelatedCopyGone(t, ctx, src, "w1-credentials-west")
	if _, err := src.Resource(secretsGVR).Namespace("apps").Get(ctx, "w1-credentials-east", metav1.GetOptions{}); err != nil {
		t.Errorf("east's related copy after west was unassigned: %v", err)
	}

	// Deleting the widget removes east's copy.
	if err := src.Resource(widgetsGVR).Namespace("apps").Delete(ctx, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitRelatedCopyGone(t, ctx, src, "w1-credentials-east")
}

// runCredentialsOperator is the test's operator on a target: for every Gizmo it writes the
// Secret "<gizmo>-credentials" in the Gizmo's namespace (data: location, password), and deletes
// it with the Gizmo (the test control planes run no garbage collector).
func runCredentialsOperator(t *testing.T, ctx context.Context, tgt dynamic.Interface, location string) {
	t.Helper()
	inf := dynamicinformer.NewFilteredDynamicInformer(tgt, gizmosGVR, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	secrets := func(ns string) dynamic.ResourceInterface { return tgt.Resource(secretsGVR).Namespace(ns) }
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			g := obj.(*unstructured.Unstructured)
			s := &unstructured.Unstructured{Object: map[string]interface{}{
				"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
				"metadata": map[string]interface{}{"name": g.GetName() + "-credentials", "namespace": g.GetNamespace(), "labels": map[string]interface{}{"app": "gizmo-operator"}},
				"data": map[string]interface{}{
					"location": base64.StdEncoding.EncodeToString([]byte(location)),
					"password": base64.StdEncoding.EncodeToString([]byte("initial")),
				},
			}}
			if _, err := secrets(g.GetNamespace()).Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
				t.Errorf("operator on %s: creating the Secret of gizmo %s: %v", location, g.GetName(), err)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			g := obj.(*unstructured.Unstructured)
			if err := secrets(g.GetNamespace()).Delete(ctx, g.GetName()+"-credentials", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				t.Errorf("operator on %s: deleting the Secret of gizmo %s: %v", location, g.GetName(), err)
			}
		},
	})
	octx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go inf.RunWithContext(octx)
}

// secretValue returns the decoded data[key] of Secret s.
func secretValue(s *unstructured.Unstructured, key string) string {
	v, _, _ := unstructured.NestedString(s.Object, "data", key)
	b, _ := base64.StdEncoding.DecodeString(v)
	return string(b)
}

// awaitRelatedCopy waits until the source holds Secret apps/name and check returns "" for it.
func awaitRelatedCopy(t *testing.T, ctx context.Context, src dynamic.Interface, name string, check func(*unstructured.Unstructured) string) {
	t.Helper()
	mapperEventually(t, ctx, time.Minute, "related copy apps/"+name+" in the source", func() (bool, string) {
		s, err := src.Resource(secretsGVR).Namespace("apps").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		msg := check(s)
		return msg == "", msg
	})
}

// awaitRelatedCopyGone waits until the source no longer holds Secret apps/name.
func awaitRelatedCopyGone(t *testing.T, ctx context.Context, src dynamic.Interface, name string) {
	t.Helper()
	mapperEventually(t, ctx, time.Minute, "related copy apps/"+name+" deleted", func() (bool, string) {
		_, err := src.Resource(secretsGVR).Namespace("apps").Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
}
