package mapper

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// TestPauseHolds: spec.paused holds every resource, spec.haltedResources the named ones only.
func TestPauseHolds(t *testing.T) {
	if !(Pause{Paused: true}).holds("configmaps") {
		t.Error("a paused location does not hold configmaps")
	}
	p := Pause{HaltedResources: []string{"deployments.apps"}}
	if !p.holds("deployments.apps") || p.holds("configmaps") || p.holds("deployments") {
		t.Errorf("%+v holds the wrong resources", p)
	}
}

// TestPauseStateWaits: with AwaitPause the state is unknown (the workers wait) until the
// first Pause is set; without it, it is known at once.
func TestPauseStateWaits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if !newPauseState(false).wait(ctx) {
		t.Fatal("a state that does not await the SyncTarget waits")
	}
	s := newPauseState(true)
	if s.wait(ctx) {
		t.Fatal("an awaiting state was known before any Pause was set")
	}
	m := &Mapper{pause: s, resources: map[schema.GroupVersionResource]*resource{}, metrics: locationMetrics{location: "pause-test"}}
	m.SetPause(context.Background(), Pause{Paused: true})
	m.SetPause(context.Background(), Pause{Paused: true}) // twice: closes once
	if !s.wait(context.Background()) || !s.current().Paused {
		t.Fatalf("after SetPause: %+v", s.current())
	}
}

// TestRefusedByTarget: the target's refusals of the object are 400, 403, 413 and 422; a
// conflict, throttling, server errors and transport errors are not.
func TestRefusedByTarget(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "a", nil), true},
		{apierrors.NewForbidden(gr, "a", errors.New("denied by webhook")), true},
		{apierrors.NewBadRequest("bad"), true},
		{apierrors.NewRequestEntityTooLargeError("big"), true},
		{apierrors.NewConflict(gr, "a", errors.New("x")), false},
		{apierrors.NewTooManyRequests("slow down", 1), false},
		{apierrors.NewInternalError(errors.New("x")), false},
		{apierrors.NewNotFound(gr, "a"), false},
		{errors.New("connection refused"), false},
	} {
		if got := refusedByTarget(c.err); got != c.want {
			t.Errorf("refusedByTarget(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestHeldWhileTheTargetStartsServing: a sync that read the resource's halted flag just before
// setServed found the target serving it (the flag still set, the target informer already
// there) is not held, and records no ResourceNotServed: TestMapperOutcomeRecordsAndPause saw a
// gadget created as its resource started get that record first, then Rejected (two record
// writes where one was due).
func TestHeldWhileTheTargetStartsServing(t *testing.T) {
	m := &Mapper{pause: newPauseState(false)}
	r := &resource{gvr: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}}
	r.halted.Store(true)
	if reason, _, held := m.held(r); !held || reason != "" {
		t.Fatalf("before the target's discovery was read: held %v reason %q, want held with no reason", held, reason)
	}
	r.checked = true
	if reason, _, held := m.held(r); !held || reason != contract.OutcomeResourceNotServed {
		t.Fatalf("a target known not to serve it: held %v reason %q, want held, %s", held, reason, contract.OutcomeResourceNotServed)
	}
	// setServed ran between the flag's read and the lock: the target serves it now.
	r.target = cache.NewSharedIndexInformer(&cache.ListWatch{}, &unstructured.Unstructured{}, 0, cache.Indexers{})
	if reason, _, held := m.held(r); held {
		t.Errorf("a resource the target serves now is held with reason %q", reason)
	}
}
