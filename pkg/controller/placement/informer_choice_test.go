package placement

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/informers"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/managedfields"
	"github.com/cluster-mapper/cluster-mapper/pkg/controller/served"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
)

var (
	configMaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// TestPlacementReadsMetadataUnlessDividing checks which informer a namespace's round reads:
// a Placement that duplicates ConfigMaps places them from their metadata (PartialObjectMetadata,
// kube-apiserver's `as=PartialObjectMetadata` watch, no data), a Placement that divides
// Deployments from the whole objects (spec.replicas); both applies name the kind that the
// RESTMapper gives. Over fake clients with the writes recorded instead of applied: TestPlacement
// (test/e2e) proves the placements against kube-apiserver.
func TestPlacementReadsMetadataUnlessDividing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var objects []runtime.Object
	for _, name := range []string{"east", "west"} {
		st := &controlv1alpha1.SyncTarget{TypeMeta: metav1.TypeMeta{APIVersion: controlv1alpha1.SchemeGroupVersion.String(), Kind: "SyncTarget"},
			ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"}}
		meta.SetStatusCondition(&st.Status.Conditions, metav1.Condition{Type: controlv1alpha1.SyncTargetReady, Status: metav1.ConditionTrue, Reason: controlv1alpha1.ReasonMapperReady})
		u, err := synctarget.ToUnstructured(st)
		if err != nil {
			t.Fatal(err)
		}
		objects = append(objects, u)
	}
	placementOf := func(ns string, gvr schema.GroupVersionResource, divide bool) *unstructured.Unstructured {
		spec := map[string]interface{}{
			"resources":     []interface{}{map[string]interface{}{"apiGroups": []interface{}{gvr.Group}, "apiVersions": []interface{}{gvr.Version}, "resources": []interface{}{gvr.Resource}}},
			"locationNames": []interface{}{"east", "west"},
		}
		if divide {
			spec["replicas"] = "Divide"
		}
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": controlv1alpha1.SchemeGroupVersion.String(), "kind": "Placement",
			"metadata": map[string]interface{}{"name": "p", "namespace": ns, "resourceVersion": "1"},
			"spec":     spec,
		}}
	}
	deployment := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]interface{}{"name": "web", "namespace": "divided", "resourceVersion": "1"},
		"spec":     map[string]interface{}{"replicas": int64(4)},
	}}
	objects = append(objects, placementOf("duplicated", configMaps, false), placementOf("divided", deployments, true), deployment)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		synctarget.Resource: "SyncTargetList", Resource: "PlacementList", configMaps: "ConfigMapList", deployments: "DeploymentList",
	}, objects...)
	metaScheme := metadatafake.NewTestScheme()
	metav1.AddMetaToScheme(metaScheme)
	metadataClient := metadatafake.NewSimpleMetadataClient(metaScheme, &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "duplicated", ResourceVersion: "1"},
	})
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)

	set := informers.NewSet(dyn, metadataClient, managedfields.Keep(FieldManager))
	c := New(Config{Dynamic: dyn, Informers: set, Resolver: served.New(mapper)})
	var mu sync.Mutex
	written := map[string]*write{}
	c.applyWrite = func(_ context.Context, w *write) error {
		mu.Lock()
		defer mu.Unlock()
		written[w.obj.GetNamespace()+"/"+w.obj.GetName()] = w
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
		set.Shutdown()
	}()

	var settings, web *write
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		settings, web = written["duplicated/settings"], written["divided/web"]
		return settings != nil && web != nil, nil
	}); err != nil {
		t.Fatalf("the controller never wrote both objects' assignments: %v", written)
	}
	if _, ok := settings.obj.(*metav1.PartialObjectMetadata); !ok {
		t.Errorf("the duplicated ConfigMap was read as %T, want its metadata", settings.obj)
	}
	if want := (schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}); settings.gvk != want {
		t.Errorf("the ConfigMap's apply names %v, want %v", settings.gvk, want)
	}
	if _, ok := web.obj.(*unstructured.Unstructured); !ok {
		t.Errorf("the divided Deployment was read as %T, want the whole object", web.obj)
	}
	if want := (schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}); web.gvk != want {
		t.Errorf("the Deployment's apply names %v, want %v", web.gvk, want)
	}
	if sum := web.decision.Replicas["east"] + web.decision.Replicas["west"]; sum != 4 {
		t.Errorf("the Deployment's 4 replicas divided as %v", web.decision.Replicas)
	}
}

// TestPlacementSharesTrimmedInformer: for a resource it reads only the metadata of, the
// placement controller reads another controller's trimmed objects (the dependency
// controller's workloads) instead of a metadata watch of its own, and a Placement that
// divides still gets the whole objects.
func TestPlacementSharesTrimmedInformer(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		synctarget.Resource: "SyncTargetList", Resource: "PlacementList", deployments: "DeploymentList",
	})
	metaScheme := metadatafake.NewTestScheme()
	metav1.AddMetaToScheme(metaScheme)
	set := informers.NewSet(dyn, metadatafake.NewSimpleMetadataClient(metaScheme), nil)
	c := New(Config{Dynamic: dyn, Informers: set})
	trimmed := set.TrimmedInformer(deployments, "test", func(obj interface{}) (interface{}, error) { return obj, nil })
	if got := c.watch(deployments, false); got != trimmed {
		t.Errorf("reading metadata, the controller did not use the trimmed informer")
	}
	if got := c.watch(deployments, true); got == trimmed || got != set.Informer(deployments) {
		t.Errorf("dividing, the controller did not use the whole objects' informer")
	}
}
