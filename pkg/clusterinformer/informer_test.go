package clusterinformer

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// configMap returns ConfigMap ns/same of cluster (no annotation when cluster is "").
func configMap(cluster string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"namespace": "ns", "name": "same"},
	}}
	if cluster != "" {
		u.SetAnnotations(map[string]string{contract.ClusterAnnotation: cluster})
	}
	return u
}

// TestInformerKeepsClustersApart checks that the informer keeps two logical clusters' objects
// with the same namespace/name as two entries (client-go's MetaNamespaceKeyFunc would keep
// one), through adds and deletes, and calls its handler for each.
func TestInformerKeepsClustersApart(t *testing.T) {
	// The fake tracker itself keys by namespace/name and cannot hold both; c1's object comes
	// from the fake source, c2's is handed to the informer's process step directly.
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{configMaps: "ConfigMapList"}, configMap("c1"))
	deleted := make(chan string, 2)
	inf := NewForResource(client, configMaps, cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj interface{}) {
		deleted <- obj.(*unstructured.Unstructured).GetAnnotations()[contract.ClusterAnnotation]
	}}, Options{Clusters: Clusters{Default: "default"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.Run(ctx)
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return inf.HasSynced(), nil
	}); err != nil {
		t.Fatal("informer did not sync")
	}
	// A second cluster's object with the same namespace/name, delivered as the informer would.
	if err := inf.process(cache.Deltas{{Type: cache.Added, Object: configMap("c2")}}, false); err != nil {
		t.Fatal(err)
	}
	keys := inf.GetStore().ListKeys()
	sort.Strings(keys)
	if strings.Join(keys, " ") != "c1|ns/same c2|ns/same" {
		t.Fatalf("store keys %v", keys)
	}
	if got, ok, _ := inf.GetStore().GetByKey(string(contract.NewKey("c2", "ns", "same"))); !ok ||
		got.(*unstructured.Unstructured).GetAnnotations()[contract.ClusterAnnotation] != "c2" {
		t.Fatalf("GetByKey(c2) = %v %v", got, ok)
	}
	// Deleting c1's object (through the source) leaves c2's.
	if err := client.Resource(configMaps).Namespace("ns").Delete(ctx, "same", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-deleted:
		if c != "c1" {
			t.Fatalf("the handler saw the deletion of %s's object, want c1's", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("delete not seen: %v", inf.GetStore().ListKeys())
	}
	// The handler runs after the store took the deletion.
	if keys := inf.GetStore().ListKeys(); len(keys) != 1 || keys[0] != "c2|ns/same" {
		t.Fatalf("remaining %v", keys)
	}
}

// TestKeyFunc checks the keys of unstructured and typed objects, with and without the
// annotation, on a kcp source and on a plain one, and of what a DeltaFIFO passes through.
func TestKeyFunc(t *testing.T) {
	typed := func(cluster string) *corev1.ConfigMap {
		u := configMap(cluster)
		cm := &corev1.ConfigMap{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cm); err != nil {
			t.Fatal(err)
		}
		return cm
	}
	kcp := KeyFunc(Clusters{Default: "fallback"})
	plain := KeyFunc(Clusters{Default: "root", IgnoreAnnotation: true})
	for _, tc := range []struct {
		name string
		key  cache.KeyFunc
		obj  interface{}
		want string
	}{
		{"kcp unstructured", kcp, configMap("c1"), "c1|ns/same"},
		{"kcp typed", kcp, typed("c1"), "c1|ns/same"},
		{"kcp without annotation", kcp, configMap(""), "fallback|ns/same"},
		{"kcp typed without annotation", kcp, typed(""), "fallback|ns/same"},
		{"plain ignores a user's annotation", plain, configMap("c1"), "root|ns/same"},
		{"plain typed ignores a user's annotation", plain, typed("c1"), "root|ns/same"},
		{"tombstone", plain, cache.DeletedFinalStateUnknown{Key: "c9|ns/gone"}, "c9|ns/gone"},
		{"explicit key", kcp, cache.ExplicitKey("c9|name"), "c9|name"},
		{"cluster-scoped", kcp, &unstructured.Unstructured{Object: map[string]interface{}{"metadata": map[string]interface{}{"name": "east",
			"annotations": map[string]interface{}{contract.ClusterAnnotation: "c3"}}}}, "c3|east"},
	} {
		got, err := tc.key(tc.obj)
		if err != nil || got != tc.want {
			t.Errorf("%s: key %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := kcp(42); err == nil {
		t.Error("an object without metadata has a key")
	}
}
