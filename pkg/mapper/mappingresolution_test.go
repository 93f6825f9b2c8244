package mapper

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// TestResolveMappingFromInformers checks the mapper's side of --namespace-mapping=auto: it
// reads the view's clusters and the target's copies from the informers once they have synced,
// puts the mapping in force (opening the workers), and stops on copies of both kinds.
func TestResolveMappingFromInformers(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	listKinds := map[schema.GroupVersionResource]string{gvr: "ConfigMapList"}
	viewObj := func(cluster, ns, name string) runtime.Object {
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]interface{}{"namespace": ns, "name": name,
				"annotations": map[string]interface{}{contract.ClusterAnnotation: cluster}},
		}}
	}
	copyAt := func(targetNS, cluster, ns, name string) runtime.Object {
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]interface{}{"namespace": targetNS, "name": name,
				"labels": map[string]interface{}{contract.LocationLabel: "east"},
				"annotations": map[string]interface{}{
					contract.SourceClusterAnnotation: cluster, contract.SourceNamespaceAnnotation: ns, contract.SourceNameAnnotation: name,
				}},
		}}
	}
	// newMapper returns a mapper whose one resource has synced-to-be informers on fake view
	// and target clients holding view and copies.
	newMapper := func(ctx context.Context, view, copies []runtime.Object) *Mapper {
		m := &Mapper{cfg: Config{Location: "east", ClusterName: DefaultClusterName, NamespaceMapping: NamespaceMappingAuto},
			resources: map[schema.GroupVersionResource]*resource{}, mappingResolved: make(chan struct{})}
		r := &resource{gvr: gvr, namespaced: true, checked: true}
		r.view = newViewInformer(dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, view...), gvr, DefaultClusterName, cache.ResourceEventHandlerFuncs{})
		target := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, copies...)
		r.target = dynamicinformer.NewFilteredDynamicInformer(target, gvr, metav1.NamespaceAll, 0, cache.Indexers{},
			func(o *metav1.ListOptions) { o.LabelSelector = listOptionsForLocation("east").LabelSelector }).Informer()
		go r.view.Run(ctx)
		go r.target.RunWithContext(ctx)
		m.resources[gvr] = r
		m.viewDiscovered.Store(true)
		return m
	}

	t.Run("two clusters on a fresh target", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		m := newMapper(ctx, []runtime.Object{viewObj("c1", "ns", "a"), viewObj("c2", "other", "b")}, nil)
		if err := m.resolveMapping(ctx); err != nil {
			t.Fatal(err)
		}
		if !m.waitMapping(ctx) || m.namespaceMapping() != NamespaceMappingPrefixed {
			t.Fatalf("mapping %q", m.namespaceMapping())
		}
	})
	t.Run("two clusters on a target filled by same", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		m := newMapper(ctx, []runtime.Object{viewObj("c1", "ns", "a"), viewObj("c2", "other", "b")}, []runtime.Object{copyAt("ns", "c1", "ns", "a")})
		if err := m.resolveMapping(ctx); err != nil {
			t.Fatal(err)
		}
		if m.namespaceMapping() != NamespaceMappingSame {
			t.Fatalf("mapping %q: a filled target's mapping flipped", m.namespaceMapping())
		}
	})
	t.Run("copies of both mappings", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		m := newMapper(ctx, []runtime.Object{viewObj("c1", "ns", "a")},
			[]runtime.Object{copyAt("ns", "c1", "ns", "a"), copyAt("c1-ns", "c1", "ns", "b")})
		err := m.resolveMapping(ctx)
		if err == nil || !strings.Contains(err.Error(), "both namespace mappings") {
			t.Fatalf("err = %v", err)
		}
		select {
		case <-m.mappingResolved:
			t.Fatal("the workers were opened although the mapping is unresolved")
		default:
		}
	})
}
