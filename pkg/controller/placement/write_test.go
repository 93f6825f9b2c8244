package placement

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/controller/worker"
	"github.com/cluster-mapper/cluster-mapper/pkg/placement"
)

// object returns a ConfigMap with annotations and the managedFields entries kube-apiserver
// writes for an apply by FieldManager of applied keys and an update by kubectl of other keys.
func object(annotations map[string]string, applied, updated []string) *unstructured.Unstructured {
	fields := func(keys []string) *metav1.FieldsV1 {
		raw := `{"f:metadata":{"f:annotations":{`
		for i, k := range keys {
			if i > 0 {
				raw += ","
			}
			raw += `"f:` + k + `":{}`
		}
		return &metav1.FieldsV1{Raw: []byte(raw + `}}}`)}
	}
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetAnnotations(annotations)
	u.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: fields(applied)},
		{Manager: "kubectl-annotate", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: fields(updated)},
	})
	return u
}

func TestUpToDate(t *testing.T) {
	d := placement.Decision{Locations: []string{"east", "west"}, Replicas: map[string]int64{"east": 2, "west": 1}}
	want := desiredAnnotations("web", d, true)
	if got := want["spec-diff.kcp.io/east"]; got != `[{"op":"add","path":"/spec/replicas","value":2}]` {
		t.Errorf("east's patch %s", got)
	}
	keys := []string{"kcp.io/assigned-locations", OwnerAnnotation, "kcp.io/status-policy", "spec-diff.kcp.io/east", "spec-diff.kcp.io/west"}
	if !upToDate(object(want, keys, nil), want) {
		t.Error("an object carrying exactly the applied annotations is not up to date")
	}
	// A patch for a location the object no longer goes to is still owned: not up to date (the
	// apply removes it).
	stale := map[string]string{"spec-diff.kcp.io/north": "[]"}
	for k, v := range want {
		stale[k] = v
	}
	if upToDate(object(stale, append(keys, "spec-diff.kcp.io/north"), nil), want) {
		t.Error("an object with an extra owned patch is up to date")
	}
	// Someone else's annotation next to ours does not matter; a value someone changed does.
	other := map[string]string{"note": "x"}
	for k, v := range want {
		other[k] = v
	}
	if !upToDate(object(other, keys, []string{"note"}), want) {
		t.Error("another manager's annotation makes the object out of date")
	}
	changed := map[string]string{}
	for k, v := range want {
		changed[k] = v
	}
	changed["kcp.io/assigned-locations"] = `["east"]`
	if upToDate(object(changed, keys[1:], keys[:1]), want) {
		t.Error("an assignment someone else changed is up to date")
	}
}

// TestApplyAllBoundsWritesInFlight checks that applyAll runs a round's writes concurrently, up
// to the controller's slots and never more, and keeps each write's own result. Every apply
// waits until limit applies are in flight at once (or 5 s pass): with writes one by one the
// first one waits in vain and the test fails.
func TestApplyAllBoundsWritesInFlight(t *testing.T) {
	const limit, n = 4, 13
	var mu sync.Mutex
	inFlight, most := 0, 0
	full := make(chan struct{})
	var fullOnce sync.Once
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "cm-07", errors.New("owned by someone else"))
	c := &Controller{limit: worker.NewLimit(limit), applyWrite: func(_ context.Context, w *write) error {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		if inFlight == limit {
			fullOnce.Do(func() { close(full) })
		}
		mu.Unlock()
		select {
		case <-full:
		case <-time.After(5 * time.Second):
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		if w.obj.GetName() == "cm-07" {
			return conflict
		}
		return nil
	}}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	var writes []*write
	for i := range n {
		u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap"}}
		u.SetNamespace("apps")
		u.SetName(fmt.Sprintf("cm-%02d", i))
		writes = append(writes, &write{gvr: gvr, obj: u, annotations: map[string]string{"a": "b"}})
	}
	c.applyAll(context.Background(), writes)
	select {
	case <-full:
	default:
		t.Fatalf("never %d applies in flight at once (at most %d)", limit, most)
	}
	if most > limit {
		t.Errorf("%d applies in flight at once, more than the %d slots", most, limit)
	}
	for _, w := range writes {
		if want := w.obj.GetName() == "cm-07"; (w.err == conflict) != want || (!want && w.err != nil) {
			t.Errorf("%s: err %v", w.obj.GetName(), w.err)
		}
	}
}
