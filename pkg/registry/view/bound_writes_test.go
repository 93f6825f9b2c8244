package view

import (
	"context"
	"net/http"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/registry/rest"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
)

// TestWritesThroughViewsNeedABinding: in the Bound mode a location writes on an object through
// its view only while its view shows the object assigned to it (docs/tenancy.md): an object of
// team-a assigned to east and west, with team-a bound to west only, takes neither east's status
// record (404) nor east's finalizer (404: east's view does not hold it), while west writes
// both. A finalizer east already holds (it was bound when it made its copy) it can still
// remove, and, once removed, not add again, so that the deletion protocol never waits for a
// location the object's namespace is not bound to.
func TestWritesThroughViewsNeedABinding(t *testing.T) {
	src := newStatusSource(t, widget("w", 7, []string{"east", "west"}, reflectPolicy, nil))
	store := cache.NewResourceStore(widgetsGVR, widgetsInfo.GVK(), true, cache.StoreOptions{DefaultCluster: "root"})
	t.Cleanup(store.Close)
	store.SetRules(teamABoundTo(t, "west"), 0)
	ss := &statusStorage{info: widgetsInfo, store: store, source: src, clusters: clusters{plain: "root"}, freshness: freshness{gvr: widgetsGVR, store: store, source: src}}
	ms := &marksStorage{st: ss}

	writeStatus := func(location string) error {
		u := statusWrite("w", "", map[string]interface{}{"phase": location})
		_, _, err := ss.Update(viewCtx(location, "team-a"), "w", rest.DefaultUpdatedObjectInfo(u), nil, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
		return err
	}
	expectCode(t, "east's status write", writeStatus("east"), http.StatusNotFound)
	if _, ok := src.get(t, "w").GetAnnotations()[contract.StatusRecordAnnotationPrefix+"east"]; ok {
		t.Fatal("east, not bound to team-a, wrote its status record")
	}
	if err := writeStatus("west"); err != nil {
		t.Fatalf("west's status write: %v", err)
	}

	// setFinalizer writes location's finalizer through its view (finalizerChange).
	setFinalizer := func(location string, add bool) error {
		_, _, err := ms.Update(viewCtx(location, "team-a"), "w", finalizerChange(location, add), nil, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
		return err
	}
	expectCode(t, "east adding its finalizer", setFinalizer("east", true), http.StatusNotFound)
	if err := setFinalizer("west", true); err != nil {
		t.Fatalf("west adding its finalizer: %v", err)
	}
	if got := src.get(t, "w").GetFinalizers(); !slices.Equal(got, []string{contract.LocationFinalizer("west")}) {
		t.Fatalf("source finalizers %v, want west's only", got)
	}

	// East made its copy while bound: its finalizer is on the object (written at the source
	// here), and east may remove it, but not add it back.
	u := src.get(t, "w")
	u.SetFinalizers(append(u.GetFinalizers(), contract.LocationFinalizer("east")))
	if _, err := src.client.Resource(widgetsGVR).Namespace("team-a").Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := setFinalizer("east", false); err != nil {
		t.Fatalf("east removing its finalizer: %v", err)
	}
	if got := src.get(t, "w").GetFinalizers(); !slices.Equal(got, []string{contract.LocationFinalizer("west")}) {
		t.Fatalf("source finalizers %v after east removed its own, want west's only", got)
	}
	expectCode(t, "east adding its finalizer again", setFinalizer("east", true), http.StatusNotFound)
}

// teamABoundTo returns rules without Customizations in the Bound mode, with east and west
// registered and a LocationBinding of team-a binding location.
func teamABoundTo(t *testing.T, location string) cache.Rules {
	t.Helper()
	s, errs := customization.NewCompiler(customization.Options{PlainCluster: "root"}).Snapshot(1, nil, []customization.Location{{Name: "east"}, {Name: "west"}})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	b := locationbinding.Compile(locationbinding.Key{Cluster: "root", Namespace: "team-a", Name: location},
		&controlv1alpha1.LocationBindingSpec{LocationNames: []string{location}})
	return s.WithBindings(locationbinding.NewIndex([]*locationbinding.Binding{b}, []locationbinding.Location{{Name: "east"}, {Name: "west"}}))
}

// TestWritesAtAReRenderingsResourceVersion: a binding added shows the object to west at the
// source's fresh resourceVersion (20), above the object's own (7), as every re-rendering after
// a change of the rules does (docs/views.md, "Customizations and resourceVersions"). West's
// mapper adds its finalizer with the resourceVersion its view shows as precondition, and the
// write is accepted (it was a 409 for ever, so the mapper never copied the object); a
// resourceVersion the view never showed is still a 409.
func TestWritesAtAReRenderingsResourceVersion(t *testing.T) {
	src := newStatusSource(t, widget("w", 7, []string{"east", "west"}, nil, nil))
	store := cache.NewResourceStore(widgetsGVR, widgetsInfo.GVK(), true, cache.StoreOptions{DefaultCluster: "root"})
	t.Cleanup(store.Close)
	store.SetRules(teamABoundTo(t, "east"), 0)
	if err := store.Replace([]interface{}{src.get(t, "w")}, "7"); err != nil {
		t.Fatal(err)
	}
	store.SetRules(teamABoundTo(t, "west"), 20)
	ss := &statusStorage{info: widgetsInfo, store: store, source: src, clusters: clusters{plain: "root"}, freshness: freshness{gvr: widgetsGVR, store: store, source: src}}
	ms := &marksStorage{st: ss}
	seen, err := ms.Get(viewCtx("west", "team-a"), "w", &metav1.GetOptions{})
	if err != nil {
		t.Fatalf("west's view after the binding: %v", err)
	}
	if rv := asUnstructured(t, seen).GetResourceVersion(); rv != "20" {
		t.Fatalf("west's view shows resourceVersion %s, want the re-rendering's 20", rv)
	}
	withFinalizer := func(rv string) *unstructured.Unstructured {
		u := asUnstructured(t, seen).DeepCopy()
		u.SetFinalizers([]string{contract.LocationFinalizer("west")})
		u.SetResourceVersion(rv)
		return u
	}
	update := func(u *unstructured.Unstructured) error {
		_, _, err := ms.Update(viewCtx("west", "team-a"), "w", rest.DefaultUpdatedObjectInfo(u), nil, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
		return err
	}
	expectCode(t, "a write at a resourceVersion west's view never showed", update(withFinalizer("19")), http.StatusConflict)
	if err := update(withFinalizer("20")); err != nil {
		t.Fatalf("west adding its finalizer at its view's resourceVersion 20: %v", err)
	}
	if got := src.get(t, "w").GetFinalizers(); !slices.Equal(got, []string{contract.LocationFinalizer("west")}) {
		t.Fatalf("source finalizers %v, want west's", got)
	}
}
