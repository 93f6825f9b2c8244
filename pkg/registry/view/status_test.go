package view

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// The tests of this file write status through the view's status storage as k8s.io/apiserver's
// UpdateResource and PatchResource handlers do (rest.Updater with the request's object) and
// check the answer and what reached the source. The source is client-go's fake dynamic client
// with kube-apiserver's optimistic concurrency added (an update whose resourceVersion is not
// the stored one is a 409; each write bumps the resourceVersion), so that the storage's
// preconditions are tested against a source that enforces them.

var (
	widgetsGVR  = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	widgetsInfo = source.ResourceInfo{GVR: widgetsGVR, Kind: "Widget", ListKind: "WidgetList", SingularName: "widget", Namespaced: true, HasStatus: true}
)

// statusSource is the source of status writes: a fake dynamic client that enforces
// resourceVersion preconditions.
type statusSource struct {
	Source // ResourceVersion and Get: not used by status writes
	client *dynamicfake.FakeDynamicClient
	// race, when set, runs once before the next update reaches the source: another writer that
	// wins the race.
	race func()
	// writes counts the updates the source accepted.
	writes int
}

// Resource implements Source.
func (s *statusSource) Resource(gvr schema.GroupVersionResource, namespace string) dynamic.ResourceInterface {
	return s.client.Resource(gvr).Namespace(namespace)
}

// ClusterResource implements Source: the test source is one plain cluster.
func (s *statusSource) ClusterResource(gvr schema.GroupVersionResource, _, namespace string) (dynamic.ResourceInterface, error) {
	return s.Resource(gvr, namespace), nil
}

func newStatusSource(t *testing.T, objs ...*unstructured.Unstructured) *statusSource {
	t.Helper()
	ro := make([]runtime.Object, len(objs))
	for i, o := range objs {
		ro[i] = o
	}
	s := &statusSource{client: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{widgetsGVR: "WidgetList"}, ro...)}
	tracker := s.client.Tracker()
	s.client.PrependReactor("update", "widgets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if s.race != nil {
			race := s.race
			s.race = nil
			race()
		}
		u := a.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		cur, err := tracker.Get(widgetsGVR, u.GetNamespace(), u.GetName())
		if err != nil {
			return true, nil, err
		}
		curRV := cur.(*unstructured.Unstructured).GetResourceVersion()
		if u.GetResourceVersion() != "" && u.GetResourceVersion() != curRV {
			return true, nil, apierrors.NewConflict(widgetsGVR.GroupResource(), u.GetName(), errors.New("the object has been modified"))
		}
		n, _ := strconv.Atoi(curRV)
		u.SetResourceVersion(strconv.Itoa(n + 1))
		if err := tracker.Update(widgetsGVR, u, u.GetNamespace()); err != nil {
			return true, nil, err
		}
		s.writes++
		return true, u, nil
	})
	return s
}

// get returns the source's object.
func (s *statusSource) get(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := s.client.Resource(widgetsGVR).Namespace("team-a").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// widget builds a source Widget at rv assigned to locs, with extra annotations and a status.
func widget(name string, rv int, locs []string, ann map[string]string, status map[string]interface{}) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]interface{}{"namespace": "team-a", "name": name, "resourceVersion": strconv.Itoa(rv)},
		"spec":     map[string]interface{}{"size": int64(3)},
	}}
	a := map[string]string{}
	if locs != nil {
		b, _ := json.Marshal(locs)
		a[contract.AssignedLocationsAnnotation] = string(b)
	}
	for k, v := range ann {
		a[k] = v
	}
	u.SetAnnotations(a)
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

var reflectPolicy = map[string]string{contract.StatusPolicyAnnotation: contract.StatusPolicyReflect}

// statusWrite is the object a status PUT sends: the location's view of the source object with
// a new status, at resourceVersion rv ("" for an unconditional write).
func statusWrite(name, rv string, status map[string]interface{}) *unstructured.Unstructured {
	u := widget(name, 0, []string{"east"}, reflectPolicy, status)
	u.SetResourceVersion(rv)
	return u
}

func TestStatusUpdate(t *testing.T) {
	ready := map[string]interface{}{"phase": "Ready"}
	old := map[string]interface{}{"phase": "Old"}
	westRecord := `{"phase":"West"}`
	type statusCase struct {
		name    string
		source  *unstructured.Unstructured
		write   *unstructured.Unstructured
		race    func(s *statusSource)
		code    int
		unreach bool
		// check looks at the source object after a successful write and at the answer.
		check func(t *testing.T, src, answer *unstructured.Unstructured)
	}
	// bigStatus is a status whose record is larger than docs/design.md's cap of 32 KiB.
	bigStatus := map[string]interface{}{"message": strings.Repeat("x", contract.MaxStatusRecordBytes)} // its JSON is larger than the cap
	cases := []statusCase{
		{name: "an object of another location is 404", source: widget("w", 7, []string{"west"}, reflectPolicy, nil), write: statusWrite("w", "7", ready), code: http.StatusNotFound},
		{name: "an unassigned object is 404", source: widget("w", 7, nil, reflectPolicy, nil), write: statusWrite("w", "7", ready), code: http.StatusNotFound},
		{name: "an object the source lacks is 404", source: widget("other", 7, []string{"east"}, reflectPolicy, nil), write: statusWrite("w", "7", ready), code: http.StatusNotFound},
		{name: "without the opt-in is 403", source: widget("w", 7, []string{"east"}, nil, nil), write: statusWrite("w", "7", ready), code: http.StatusForbidden},
		{name: "with status-policy None is 403", source: widget("w", 7, []string{"east"}, map[string]string{contract.StatusPolicyAnnotation: contract.StatusPolicyNone}, nil), write: statusWrite("w", "7", ready), code: http.StatusForbidden},
		{name: "a stale resourceVersion is 409", source: widget("w", 7, []string{"east"}, reflectPolicy, old), write: statusWrite("w", "6", ready), code: http.StatusConflict},
		{name: "losing a race to a change the location can see is 409", source: widget("w", 7, []string{"east"}, reflectPolicy, old), write: statusWrite("w", "7", ready),
			race: func(s *statusSource) { s.bumpSpec() }, code: http.StatusConflict},
		{name: "the source unreachable is 503", source: widget("w", 7, []string{"east"}, reflectPolicy, nil), write: statusWrite("w", "7", ready), unreach: true, code: http.StatusServiceUnavailable},
		{name: "a status record over 32 KiB is 413", source: widget("w", 7, []string{"east", "west"}, reflectPolicy, nil), write: statusWrite("w", "7", bigStatus), code: http.StatusRequestEntityTooLarge},

		{name: "a lone location's status becomes .status", source: widget("w", 7, []string{"east"}, reflectPolicy, old), write: statusWrite("w", "7", ready),
			check: func(t *testing.T, src, answer *unstructured.Unstructured) {
				if !equalJSON(src.Object["status"], ready) || !equalJSON(answer.Object["status"], ready) {
					t.Errorf("source .status %v, answer .status %v; want %v", src.Object["status"], answer.Object["status"], ready)
				}
				if src.GetResourceVersion() != "8" || answer.GetResourceVersion() != "8" {
					t.Errorf("resourceVersions: source %s, answer %s; want 8", src.GetResourceVersion(), answer.GetResourceVersion())
				}
			}},
		{name: "an unconditional write that loses a race is applied again", source: widget("w", 7, []string{"east"}, reflectPolicy, old), write: statusWrite("w", "", ready),
			race: func(s *statusSource) { s.bumpSpec() },
			check: func(t *testing.T, src, _ *unstructured.Unstructured) {
				size, _, _ := unstructured.NestedInt64(src.Object, "spec", "size")
				if !equalJSON(src.Object["status"], ready) || size != 4 {
					t.Errorf("source after the race: status %v, spec.size %d; want %v and the other writer's 4", src.Object["status"], size, ready)
				}
			}},
		{name: "one of several locations writes its record only", source: widget("w", 7, []string{"east", "west"}, map[string]string{contract.StatusPolicyAnnotation: contract.StatusPolicyReflect, contract.StatusRecordAnnotationPrefix + "west": westRecord}, old),
			write: statusWrite("w", "7", ready),
			check: func(t *testing.T, src, answer *unstructured.Unstructured) {
				ann := src.GetAnnotations()
				if !equalJSON(json.RawMessage(ann[contract.StatusRecordAnnotationPrefix+"east"]), ready) || ann[contract.StatusRecordAnnotationPrefix+"west"] != westRecord {
					t.Errorf("source records: east %q, west %q", ann[contract.StatusRecordAnnotationPrefix+"east"], ann[contract.StatusRecordAnnotationPrefix+"west"])
				}
				if !equalJSON(src.Object["status"], old) {
					t.Errorf("source .status changed to %v without kcp.io/status-location naming east", src.Object["status"])
				}
				if !equalJSON(answer.Object["status"], ready) {
					t.Errorf("the answer shows status %v, want east's %v", answer.Object["status"], ready)
				}
				for k := range answer.GetAnnotations() {
					if strings.HasPrefix(k, contract.StatusRecordAnnotationPrefix) {
						t.Errorf("the answer shows the status record %s", k)
					}
				}
			}},
		{name: "the status location also fills .status", source: widget("w", 7, []string{"east", "west"}, map[string]string{contract.StatusPolicyAnnotation: contract.StatusPolicyReflect, contract.StatusLocationAnnotation: "east"}, old),
			write: statusWrite("w", "7", ready),
			check: func(t *testing.T, src, _ *unstructured.Unstructured) {
				if !equalJSON(json.RawMessage(src.GetAnnotations()[contract.StatusRecordAnnotationPrefix+"east"]), ready) || !equalJSON(src.Object["status"], ready) {
					t.Errorf("source: record %q, .status %v; want both %v", src.GetAnnotations()[contract.StatusRecordAnnotationPrefix+"east"], src.Object["status"], ready)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := newStatusSource(t, c.source)
			if c.race != nil {
				c.race(src) // arms the race; see bumpSpec
			}
			before := src.get(t, c.source.GetName())
			if c.unreach {
				src.client.PrependReactor("get", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
				})
			}
			store := cache.NewResourceStore(widgetsGVR, widgetsInfo.GVK(), true, cache.StoreOptions{DefaultCluster: "root"})
			st := &statusStorage{info: widgetsInfo, store: store, source: src, clusters: clusters{plain: "root"}, freshness: freshness{gvr: widgetsGVR, store: store, source: src}}
			t.Cleanup(store.Close)
			var updater rest.Updater = st
			obj, created, err := updater.Update(viewCtx("east", "team-a"), c.write.GetName(), rest.DefaultUpdatedObjectInfo(c.write), nil, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			if c.code != 0 {
				expectCode(t, "status Update", err, c.code)
				if c.unreach {
					return
				}
				if after := src.get(t, c.source.GetName()); !equalJSON(after.Object["status"], before.Object["status"]) || !equalJSON(after.GetAnnotations(), before.GetAnnotations()) {
					t.Errorf("a refused write changed the source: %v", after.Object)
				}
				return
			}
			if err != nil {
				t.Fatalf("status Update: %v", err)
			}
			if created {
				t.Error("a status write reported that it created the object")
			}
			c.check(t, src.get(t, c.source.GetName()), asUnstructured(t, obj))
		})
	}
}

// bumpSpec arms the source so that another writer changes the object's spec (and so its
// resourceVersion) right before the next update arrives.
func (s *statusSource) bumpSpec() {
	s.race = func() {
		u, err := s.client.Tracker().Get(widgetsGVR, "team-a", "w")
		if err != nil {
			return
		}
		w := u.(*unstructured.Unstructured).DeepCopy()
		_ = unstructured.SetNestedField(w.Object, int64(4), "spec", "size")
		n, _ := strconv.Atoi(w.GetResourceVersion())
		w.SetResourceVersion(strconv.Itoa(n + 1))
		_ = s.client.Tracker().Update(widgetsGVR, w, "team-a")
	}
}

// TestStatusGet: the status subresource reads the location's view from the cache: 404 for an
// object of another location.
func TestStatusGet(t *testing.T) {
	store := cache.NewResourceStore(widgetsGVR, widgetsInfo.GVK(), true, cache.StoreOptions{DefaultCluster: "root"})
	t.Cleanup(store.Close)
	east := widget("e", 5, []string{"east", "west"}, map[string]string{contract.StatusPolicyAnnotation: contract.StatusPolicyReflect, contract.StatusRecordAnnotationPrefix + "east": `{"phase":"East"}`, contract.StatusRecordAnnotationPrefix + "west": `{"phase":"West"}`}, nil)
	west := widget("w", 6, []string{"west"}, reflectPolicy, nil)
	if err := store.Replace([]interface{}{east, west}, "10"); err != nil {
		t.Fatal(err)
	}
	src := newStatusSource(t)
	var getter rest.Getter = &statusStorage{info: widgetsInfo, store: store, source: src, clusters: clusters{plain: "root"}, freshness: freshness{gvr: widgetsGVR, store: store, source: src}}
	obj, err := getter.Get(viewCtx("east", "team-a"), "e", &metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if u := asUnstructured(t, obj); !equalJSON(u.Object["status"], map[string]interface{}{"phase": "East"}) {
		t.Errorf("east's view of the status is %v, want its own record", u.Object["status"])
	}
	_, err = getter.Get(viewCtx("east", "team-a"), "w", &metav1.GetOptions{})
	expectCode(t, "Get of west's object", err, http.StatusNotFound)
}

// equalJSON compares two values by their JSON.
func equalJSON(a, b interface{}) bool {
	norm := func(v interface{}) string {
		if raw, ok := v.(json.RawMessage); ok {
			var x interface{}
			if json.Unmarshal(raw, &x) != nil {
				return "invalid:" + string(raw)
			}
			v = x
		}
		out, _ := json.Marshal(v)
		return string(out)
	}
	return norm(a) == norm(b)
}
