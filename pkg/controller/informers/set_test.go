package informers

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"
)

// TestTrimmedInformer: a trimmed informer stores its objects through the Set's transform and
// then its trim, apart from the whole objects' informer; ObjectInformer offers it to a
// controller that reads metadata until the Set watches the whole objects. The informers run
// over a fake dynamic client: this is the Set's bookkeeping, the controllers' e2e tests prove
// the informers against kube-apiserver.
func TestTrimmedInformer(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	obj := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]interface{}{"name": "web", "namespace": "ns", "labels": map[string]interface{}{"app": "web"}},
		"spec":     map[string]interface{}{"replicas": int64(2)},
		"status":   map[string]interface{}{"replicas": int64(2)},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "DeploymentList"}, obj)
	// The Set's transform marks what it saw; the trim drops status.
	mark := func(o interface{}) (interface{}, error) {
		u := o.(*unstructured.Unstructured)
		u.SetAnnotations(map[string]string{"transformed": "yes"})
		return u, nil
	}
	trim := func(o interface{}) (interface{}, error) {
		u := o.(*unstructured.Unstructured)
		delete(u.Object, "status")
		return u, nil
	}
	s := NewSet(dyn, nil, mark)
	if _, ok := s.ObjectInformer(gvr); ok {
		t.Fatal("ObjectInformer offered an informer before any was made")
	}
	inf := s.TrimmedInformer(gvr, "test", trim)
	if again := s.TrimmedInformer(gvr, "test", trim); again != inf {
		t.Error("a second TrimmedInformer of the same resource and trim made another informer")
	}
	if got, ok := s.ObjectInformer(gvr); !ok || got != inf {
		t.Error("ObjectInformer did not offer the trimmed informer")
	}
	if s.Watches(gvr) {
		t.Error("a trimmed informer counts as one of whole objects")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.Start(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the trimmed informer never synced")
	}
	stored, ok, _ := inf.GetIndexer().GetByKey("ns/web")
	if !ok {
		t.Fatal("the trimmed informer does not hold the object")
	}
	u := stored.(*unstructured.Unstructured)
	if _, found := u.Object["status"]; found || u.GetAnnotations()["transformed"] != "yes" {
		t.Errorf("stored %v: want the Set's transform applied and status trimmed", u.Object)
	}
	if byNS, _ := inf.GetIndexer().ByIndex(cache.NamespaceIndex, "ns"); len(byNS) != 1 {
		t.Errorf("the namespace index holds %d objects, want 1", len(byNS))
	}
	whole := s.Informer(gvr)
	if got, ok := s.ObjectInformer(gvr); !ok || got != whole {
		t.Error("ObjectInformer did not prefer the whole objects' informer once it existed")
	}
	if !cache.WaitForCacheSync(ctx.Done(), whole.HasSynced) {
		t.Fatal("the whole objects' informer never synced")
	}
	if w, _, _ := whole.GetIndexer().GetByKey("ns/web"); w.(*unstructured.Unstructured).Object["status"] == nil {
		t.Error("the whole objects' informer lost status to another informer's trim")
	}
	cancel()
	s.Shutdown() // returns once every informer, the trimmed one too, has stopped
}
