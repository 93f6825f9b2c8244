package kcpproxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
	"github.com/cluster-mapper/cluster-mapper/test/framework/kcpproxy"
)

var (
	namespacesGVR  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	configMapsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

func dyn(t *testing.T, srv *kcpproxy.Server, cluster string) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(srv.Config(cluster))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func configMap(ns, name string, data string, ann map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": name, "namespace": ns},
		"data":     map[string]interface{}{"k": data},
	}}
	u.SetAnnotations(ann)
	return u
}

// TestProxyAgainstKubeAPIServer drives the proxy in front of a real kube-apiserver the way
// mapper-apiserver and the e2e tests use it: the same namespace/name in two logical clusters,
// per-cluster reads and writes (status subresource included), wildcard lists and watches, an
// immutable kcp.io/cluster, and Statuses in the cluster's terms.
func TestProxyAgainstKubeAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "backing"})
	srv, err := kcpproxy.Start(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c1, c2, all := dyn(t, srv, "c1"), dyn(t, srv, "c2"), dyn(t, srv, kcpproxy.Wildcard)
	backing, err := dynamic.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}

	// Namespaces are per cluster.
	for _, d := range []dynamic.Interface{c1, c2} {
		ns := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]interface{}{"name": "ns"}}}
		got, err := d.Resource(namespacesGVR).Create(ctx, ns, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetName() != "ns" {
			t.Fatalf("created namespace reads as %q", got.GetName())
		}
	}
	if _, err := backing.Resource(namespacesGVR).Get(ctx, "c1--ns", metav1.GetOptions{}); err != nil {
		t.Fatalf("the backing namespace of c1/ns: %v", err)
	}
	nsList, err := c1.Resource(namespacesGVR).List(ctx, metav1.ListOptions{})
	if err != nil || len(nsList.Items) != 1 || nsList.Items[0].GetName() != "ns" || nsList.Items[0].GetAnnotations()[contract.ClusterAnnotation] != "c1" {
		t.Fatalf("namespaces of c1: %v, %v", nsList, err)
	}

	// The same namespace/name in both clusters; a write naming its own cluster is accepted and
	// the annotation is never stored.
	for i, d := range []dynamic.Interface{c1, c2} {
		cluster := []string{"c1", "c2"}[i]
		got, err := d.Resource(configMapsGVR).Namespace("ns").Create(ctx, configMap("ns", "same", cluster, map[string]string{contract.ClusterAnnotation: cluster}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetNamespace() != "ns" || got.GetAnnotations()[contract.ClusterAnnotation] != cluster {
			t.Fatalf("created in %s: %s/%s %v", cluster, got.GetNamespace(), got.GetName(), got.GetAnnotations())
		}
	}
	stored, err := backing.Resource(configMapsGVR).Namespace("c2--ns").Get(ctx, "same", metav1.GetOptions{})
	if err != nil || stored.GetAnnotations()[contract.ClusterAnnotation] != "" {
		t.Fatalf("stored object of c2: %v, %v", stored, err)
	}
	got, err := c1.Resource(configMapsGVR).Namespace("ns").Get(ctx, "same", metav1.GetOptions{})
	if err != nil || got.Object["data"].(map[string]interface{})["k"] != "c1" || got.GetAnnotations()[contract.ClusterAnnotation] != "c1" {
		t.Fatalf("GET in c1: %v, %v", got, err)
	}

	// kcp.io/cluster is immutable: update, merge patch, JSON patch and a create in the wrong
	// cluster are refused.
	forged := got.DeepCopy()
	forged.SetAnnotations(map[string]string{contract.ClusterAnnotation: "c2"})
	if _, err := c1.Resource(configMapsGVR).Namespace("ns").Update(ctx, forged, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("update changing kcp.io/cluster: %v, want 422", err)
	}
	cmInC1 := c1.Resource(configMapsGVR).Namespace("ns")
	if _, err := cmInC1.Patch(ctx, "same", types.MergePatchType, []byte(`{"metadata":{"annotations":{"kcp.io/cluster":null}}}`), metav1.PatchOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("merge patch removing kcp.io/cluster: %v, want 422", err)
	}
	if _, err := cmInC1.Patch(ctx, "same", types.JSONPatchType, []byte(`[{"op":"replace","path":"/metadata/annotations/kcp.io~1cluster","value":"c2"}]`), metav1.PatchOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("JSON patch changing kcp.io/cluster: %v, want 422", err)
	}
	if _, err := c2.Resource(configMapsGVR).Namespace("ns").Create(ctx, configMap("ns", "other", "x", map[string]string{contract.ClusterAnnotation: "c1"}), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("create in c2 naming c1: %v, want 422", err)
	}
	patched, err := cmInC1.Patch(ctx, "same", types.StrategicMergePatchType, []byte(`{"metadata":{"annotations":{"kcp.io/cluster":"c1","p":"1"}}}`), metav1.PatchOptions{})
	if err != nil || patched.GetAnnotations()["p"] != "1" {
		t.Fatalf("a patch keeping kcp.io/cluster: %v, %v", patched, err)
	}
	applied, err := cmInC1.Patch(ctx, "applied", types.ApplyYAMLPatchType, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: ns\ndata:\n  k: a\n"), metav1.PatchOptions{FieldManager: "test"})
	if err != nil || applied.GetNamespace() != "ns" || applied.GetAnnotations()[contract.ClusterAnnotation] != "c1" {
		t.Fatalf("server-side apply in c1: %v, %v", applied, err)
	}

	// Statuses read in the cluster's terms.
	_, err = c1.Resource(configMapsGVR).Namespace("missing").Create(ctx, configMap("missing", "x", "x", nil), metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `"missing"`) || strings.Contains(err.Error(), "c1--") {
		t.Errorf("create in a missing namespace: %v, want a 404 naming \"missing\"", err)
	}
	if _, err := all.Resource(configMapsGVR).Namespace("ns").Get(ctx, "same", metav1.GetOptions{}); !apierrors.IsMethodNotSupported(err) {
		t.Errorf("GET on the wildcard endpoint: %v, want 405", err)
	}

	// The status subresource of one cluster's object.
	dep := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]interface{}{"name": "web", "namespace": "ns"},
		"spec": map[string]interface{}{
			"selector": map[string]interface{}{"matchLabels": map[string]interface{}{"app": "web"}},
			"template": map[string]interface{}{
				"metadata": map[string]interface{}{"labels": map[string]interface{}{"app": "web"}},
				"spec":     map[string]interface{}{"containers": []interface{}{map[string]interface{}{"name": "app", "image": "app"}}},
			},
		},
	}}
	for _, d := range []dynamic.Interface{c1, c2} {
		if _, err := d.Resource(deploymentsGVR).Namespace("ns").Create(ctx, dep.DeepCopy(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d1, err := c1.Resource(deploymentsGVR).Namespace("ns").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(d1.Object, int64(7), "status", "observedGeneration")
	if _, err := c1.Resource(deploymentsGVR).Namespace("ns").UpdateStatus(ctx, d1, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status update in c1: %v", err)
	}
	for ns, want := range map[string]int64{"c1--ns": 7, "c2--ns": 0} {
		b, err := backing.Resource(deploymentsGVR).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if g, _, _ := unstructured.NestedInt64(b.Object, "status", "observedGeneration"); g != want {
			t.Errorf("backing %s/web has observedGeneration %d, want %d", ns, g, want)
		}
	}

	// Wildcard list: both clusters' ns/same, each with its cluster; nothing from outside them.
	list, err := all.Resource(configMapsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clusters := map[string]string{}
	for _, i := range list.Items {
		clusters[i.GetAnnotations()[contract.ClusterAnnotation]+"|"+i.GetNamespace()+"/"+i.GetName()] = i.Object["data"].(map[string]interface{})["k"].(string)
	}
	if len(list.Items) != 3 || clusters["c1|ns/same"] != "c1" || clusters["c2|ns/same"] != "c2" || clusters["c1|ns/applied"] != "a" {
		t.Fatalf("wildcard list: %v", clusters)
	}

	// The same list as metadata only (client-go's metadata client: PartialObjectMetadataList,
	// as mapper-controller's informers read every mirrored resource).
	meta, err := metadata.NewForConfig(srv.Config(kcpproxy.Wildcard))
	if err != nil {
		t.Fatal(err)
	}
	metaList, err := meta.Resource(configMapsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("wildcard metadata list: %v", err)
	}
	metaKeys := map[string]bool{}
	for _, i := range metaList.Items {
		metaKeys[i.Annotations[contract.ClusterAnnotation]+"|"+i.Namespace+"/"+i.Name] = true
	}
	if len(metaList.Items) != 3 || !metaKeys["c1|ns/same"] || !metaKeys["c2|ns/same"] || !metaKeys["c1|ns/applied"] {
		t.Fatalf("wildcard metadata list: %v", metaKeys)
	}

	// Watches: one cluster sees its own events only, the wildcard sees both; frames arrive
	// while the watch is open.
	w1, err := c1.Resource(configMapsGVR).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Stop()
	wAll, err := all.Resource(configMapsGVR).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer wAll.Stop()
	if _, err := c2.Resource(configMapsGVR).Namespace("ns").Create(ctx, configMap("ns", "second", "c2", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c1.Resource(configMapsGVR).Namespace("ns").Delete(ctx, "same", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next := func(w watch.Interface) (watch.EventType, string) {
		t.Helper()
		select {
		case ev := <-w.ResultChan():
			u := ev.Object.(*unstructured.Unstructured)
			return ev.Type, u.GetAnnotations()[contract.ClusterAnnotation] + "|" + u.GetNamespace() + "/" + u.GetName()
		case <-time.After(30 * time.Second):
			t.Fatal("no watch event within 30s")
		}
		return "", ""
	}
	if typ, key := next(w1); typ != watch.Deleted || key != "c1|ns/same" {
		t.Errorf("c1's watch: %s %s, want DELETED c1|ns/same", typ, key)
	}
	for _, want := range []string{"ADDED c2|ns/second", "DELETED c1|ns/same"} {
		if typ, key := next(wAll); string(typ)+" "+key != want {
			t.Errorf("wildcard watch: %s %s, want %s", typ, key, want)
		}
	}
	if _, err := c2.Resource(configMapsGVR).Namespace("ns").Get(ctx, "same", metav1.GetOptions{}); err != nil {
		t.Errorf("c2's ns/same after c1's was deleted: %v", err)
	}
}
