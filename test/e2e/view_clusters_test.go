package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
)

// plainClusterName is the logical cluster of the view tests' plain source (mapper-apiserver's
// default --cluster-name).
const plainClusterName = "default"

// testNoGhostObjects is the e2e regression test of ghost objects: on a plain source, changing
// kcp.io/cluster on an object used to leave a copy under the old key, listed even after the
// source object was deleted. A plain source now ignores the annotation, and the view shows the
// configured cluster in it.
func testNoGhostObjects(t *testing.T, ctx context.Context, env *viewEnv) {
	ns := env.nss[0]
	src := env.src.Resource(configMapsGVR).Namespace(ns)
	view := env.views["east"].Resource(configMapsGVR).Namespace(ns)
	cm := newConfigMap(ns, "ghost", "east")
	ann := cm.GetAnnotations()
	ann[contract.ClusterAnnotation] = "user-a"
	cm.SetAnnotations(ann)
	created, err := src.Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// viewCopies lists the view's objects named ghost (consistent list: includes every write
	// made before it).
	viewCopies := func() []unstructured.Unstructured {
		list, err := view.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=ghost"})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	waitFor := func(what string, cond func([]unstructured.Unstructured) bool) []unstructured.Unstructured {
		t.Helper()
		var items []unstructured.Unstructured
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			items = viewCopies()
			return cond(items), nil
		}); err != nil {
			t.Fatalf("%s: the view shows %d copies: %v", what, len(items), items)
		}
		return items
	}
	items := waitFor("created", func(items []unstructured.Unstructured) bool {
		return len(items) == 1 && items[0].GetResourceVersion() == created.GetResourceVersion()
	})
	if c := items[0].GetAnnotations()[contract.ClusterAnnotation]; c != plainClusterName {
		t.Fatalf("the view shows kcp.io/cluster=%q, want the configured cluster %q", c, plainClusterName)
	}

	ann = created.GetAnnotations()
	ann[contract.ClusterAnnotation] = "user-b"
	created.SetAnnotations(ann)
	updated, err := src.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the update to reach the view, then the view must hold exactly one copy.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		got, err := view.Get(ctx, "ghost", metav1.GetOptions{})
		return err == nil && got.GetResourceVersion() == updated.GetResourceVersion(), nil
	}); err != nil {
		t.Fatalf("the update did not reach the view: %v", err)
	}
	if items := viewCopies(); len(items) != 1 || items[0].GetAnnotations()[contract.ClusterAnnotation] != plainClusterName {
		t.Fatalf("after changing kcp.io/cluster the view holds %d copies: %v", len(items), items)
	}

	if err := src.Delete(ctx, "ghost", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("deleted", func(items []unstructured.Unstructured) bool { return len(items) == 0 })
	if _, err := view.Get(ctx, "ghost", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("GET after the delete: %v, want 404", err)
	}
}
