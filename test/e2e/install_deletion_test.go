package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationevents"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// installedDeletion runs the deletion protocol (docs/design.md, "Deletion") on what TestInstall
// installed, so that every write it needs is made with the charts' RBAC alone: mapper-apiserver
// writes east's finalizer to the source object for the mapper (update of the mirrored
// resource) and records a DeletionPending Event (create of events.k8s.io Events) while the
// stopped mapper holds an object; mapper-controller releases the finalizers of the retired
// location when its SyncTarget is deleted (patch of the mirrored resource). ns is the source
// namespace holding catalog, east's object the mapper has copied; mapper is east's mapper,
// stopped on the way.
func installedDeletion(t *testing.T, ctx context.Context, src, tgt dynamic.Interface, ns string, mapper *framework.Process) {
	t.Helper()
	cms := src.Resource(configMapsGVR).Namespace(ns)
	eastFinalizer := func(name string) (*unstructured.Unstructured, bool, error) {
		u, err := cms.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		return u, slices.Equal(locationFinalizers(u), []string{"east"}), nil
	}
	gone := func(c dynamic.ResourceInterface, name string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			_, err := c.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		}
	}
	held := func(name string) *unstructured.Unstructured {
		var u *unstructured.Unstructured
		await(t, ctx, time.Minute, name+" held by east's finalizer", func(context.Context) (bool, error) {
			var ok bool
			var err error
			u, ok, err = eastFinalizer(name)
			return ok, err
		})
		return u
	}

	// The mapper holds what it copied; a deletion waits for the copy to go, then completes.
	held("catalog")
	if err := cms.Delete(ctx, "catalog", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, ctx, time.Minute, "catalog's copy gone from the target", gone(tgt.Resource(configMapsGVR).Namespace(ns), "catalog"))
	await(t, ctx, time.Minute, "catalog gone from the source once east released it", gone(cms, "catalog"))

	// An offline location holds a deletion, visibly; retiring it releases the object.
	if _, err := cms.Create(ctx, newConfigMap(ns, "orders", "east"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, ctx, time.Minute, "orders' copy on the target", func(ctx context.Context) (bool, error) {
		_, err := tgt.Resource(configMapsGVR).Namespace(ns).Get(ctx, "orders", metav1.GetOptions{})
		return err == nil, nil
	})
	orders := held("orders")
	if err := mapper.Stop(); err != nil {
		t.Fatalf("stopping east's mapper: %v", err)
	}
	if err := cms.Delete(ctx, "orders", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	events := src.Resource(schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}).Namespace(ns)
	name := locationevents.EventName(cache.PendingDeletion{Name: "orders", UID: orders.GetUID(), Location: "east"})
	await(t, ctx, time.Minute, "the DeletionPending Event naming east on orders", func(ctx context.Context) (bool, error) {
		e, err := events.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		note, _, _ := unstructured.NestedString(e.Object, "note")
		return strings.Contains(note, "location east"), nil
	})
	if u, ok, err := eastFinalizer("orders"); err != nil || !ok || u.GetDeletionTimestamp() == nil {
		t.Fatalf("orders while east's mapper is stopped: %v, east's finalizer alone %v; want it Terminating and held by east", err, ok)
	}
	if err := src.Resource(synctarget.Resource).Delete(ctx, "east", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, ctx, time.Minute, "orders gone from the source once east's SyncTarget was deleted", gone(cms, "orders"))
	if _, err := tgt.Resource(configMapsGVR).Namespace(ns).Get(ctx, "orders", metav1.GetOptions{}); err != nil {
		t.Errorf("the retired location's copy of orders: %v; want it left in place", err)
	}
	t.Logf("deletion with the charts' RBAC: catalog deleted after its copy, orders held by the stopped east (Event %s), released by retiring east", name)
}
