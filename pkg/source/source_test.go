package source

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	discoveryfake "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
)

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func configMap(namespace, name, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetResourceVersion(rv)
	return u
}

func fakeDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{configMapsGVR: "ConfigMapList"}, objs...)
}

// TestReadsGoToTheObjectsCluster checks that on a kcp source (ClusterDynamic set) reads by name
// and write clients go to the object's own logical cluster, while lists use the configured
// (wildcard) client; and that on a plain source everything goes to the one client.
func TestReadsGoToTheObjectsCluster(t *testing.T) {
	ctx := context.Background()
	wildcard := fakeDynamic(configMap("ns", "a", "1"), configMap("ns", "b", "2"))
	clusterA := fakeDynamic(configMap("ns", "a", "7"))
	var asked []string
	kcp, err := New(Config{
		Dynamic:   wildcard,
		Discovery: &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}},
		ClusterDynamic: func(cluster string) (dynamic.Interface, error) {
			asked = append(asked, cluster)
			return clusterA, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := kcp.Get(ctx, configMapsGVR, "a-cluster", "ns", "a")
	if err != nil || got.GetResourceVersion() != "7" {
		t.Fatalf("Get on a kcp source: %v, resourceVersion %q; want the cluster's version 7", err, got.GetResourceVersion())
	}
	if len(asked) != 1 || asked[0] != "a-cluster" {
		t.Fatalf("clusters asked for: %v, want [a-cluster]", asked)
	}
	list, err := kcp.List(ctx, configMapsGVR, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.(*unstructured.UnstructuredList).Items); n != 2 {
		t.Fatalf("List on a kcp source listed %d objects, want the wildcard's 2", n)
	}

	plain, err := New(Config{Dynamic: wildcard, Discovery: &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err = plain.Get(ctx, configMapsGVR, "root", "ns", "b")
	if err != nil || got.GetResourceVersion() != "2" {
		t.Fatalf("Get on a plain source: %v, resourceVersion %q; want 2", err, got.GetResourceVersion())
	}
	if _, err := New(Config{Dynamic: wildcard}); err == nil {
		t.Fatal("New without Discovery succeeded")
	}
}
