package mapper

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// TestViewInformerKeepsClustersApart checks that the view informer keeps two logical clusters'
// objects with the same namespace/name as two entries (client-go's MetaNamespaceKeyFunc would
// keep one), through adds and deletes.
func TestViewInformerKeepsClustersApart(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	obj := func(cluster string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]interface{}{"namespace": "ns", "name": "same",
				"annotations": map[string]interface{}{contract.ClusterAnnotation: cluster}},
		}}
	}
	// The fake tracker itself keys by namespace/name and cannot hold both; c1's object comes
	// from the fake source, c2's is handed to the informer's process step directly.
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ConfigMapList"}, obj("c1"))
	vi := newViewInformer(client, gvr, "default", cache.ResourceEventHandlerFuncs{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go vi.RunWithContext(ctx)
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return vi.HasSynced(), nil
	}); err != nil {
		t.Fatal("informer did not sync")
	}
	// A second cluster's object with the same namespace/name, delivered as the informer would.
	if err := vi.process(cache.Deltas{{Type: cache.Added, Object: obj("c2")}}, false); err != nil {
		t.Fatal(err)
	}
	keys := vi.GetStore().ListKeys()
	sort.Strings(keys)
	if strings.Join(keys, " ") != "c1|ns/same c2|ns/same" {
		t.Fatalf("store keys %v", keys)
	}
	if got, ok, _ := vi.GetStore().GetByKey(itemKey{GVR: gvr, Cluster: "c2", Namespace: "ns", Name: "same"}.storeKey()); !ok ||
		got.(*unstructured.Unstructured).GetAnnotations()[contract.ClusterAnnotation] != "c2" {
		t.Fatalf("GetByKey(c2) = %v %v", got, ok)
	}
	// Deleting c1's object (through the source) leaves c2's.
	if err := client.Resource(gvr).Namespace("ns").Delete(ctx, "same", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(vi.GetStore().ListKeys()) == 1, nil
	}); err != nil {
		t.Fatalf("delete not seen: %v", vi.GetStore().ListKeys())
	}
	if keys := vi.GetStore().ListKeys(); keys[0] != "c2|ns/same" {
		t.Fatalf("remaining %v", keys)
	}
}
