package view

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/dynamic"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationevents"
)

// eventsGVR is events.k8s.io/v1 events.
var eventsGVR = schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}

// TestOutcomeRecordsBecomeEvents writes apply outcome records through a location's view to a
// real kube-apiserver, with the real locationevents.Recorder: a record with a new reason
// becomes one Warning Event at the source regarding the object, with the reason and the
// location's message; the same reason written again (a new message) makes no second Event; a
// new reason makes a second one.
func TestOutcomeRecordsBecomeEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := startMarksFixture(t, ctx)
	dyn, cms, store, created := f.dyn, f.cms, f.store, f.created
	recorder := locationevents.New(locationevents.Config{
		Client:   func(string) (dynamic.Interface, error) { return dyn, nil },
		Kind:     func(schema.GroupVersionResource) (string, string) { return "v1", "ConfigMap" },
		Instance: "test",
	})
	go recorder.Run(ctx)
	var told []string // the reasons marksStorage told the Recorder of
	ms := &marksStorage{st: f.ss, recorded: func(o locationevents.Outcome) {
		told = append(told, o.Reason)
		recorder.Recorded(o)
	}}

	write := func(reason, message string) {
		t.Helper()
		record := fmt.Sprintf(`{"reason":%q,"message":%q,"time":"2026-11-29T00:00:00Z"}`, reason, message)
		_, _, err := ms.Update(viewCtx("east", "ns"), "a", rest.DefaultUpdatedObjectInfo(nil, func(_ context.Context, _, old runtime.Object) (runtime.Object, error) {
			u := old.(*unstructured.Unstructured).DeepCopy()
			ann := u.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			ann[contract.OutcomeAnnotation("east")] = record
			u.SetAnnotations(ann)
			return u, nil
		}), nil, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("east writing its outcome record %s: %v", reason, err)
		}
		// The store follows the source, as its watch would.
		now, err := cms.Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Update(now); err != nil {
			t.Fatal(err)
		}
	}
	events := func() []unstructured.Unstructured {
		list, err := dyn.Resource(eventsGVR).Namespace("ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	waitEvents := func(n int) []unstructured.Unstructured {
		t.Helper()
		var got []unstructured.Unstructured
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			got = events()
			return len(got) >= n, nil
		}); err != nil {
			t.Fatalf("waiting for %d Events: have %d", n, len(got))
		}
		return got
	}

	write("Conflict", "its place is taken by apps/b")
	got := waitEvents(1)
	e := got[0].Object
	regarding, _ := e["regarding"].(map[string]interface{})
	if e["reason"] != "Conflict" || e["type"] != "Warning" || regarding["name"] != "a" || regarding["uid"] != string(created.GetUID()) ||
		e["note"] != "Location east: its place is taken by apps/b (its outcome record outcome.kcp.io/east)" {
		t.Errorf("the Event: reason %v, type %v, regarding %v, note %q", e["reason"], e["type"], regarding, e["note"])
	}

	// The same reason again is not told (the Event's name would be the same anyway); a new
	// reason makes one more Event.
	write("Conflict", "its place is taken by apps/c")
	write("ApplyFailed", "the target refused it")
	got = waitEvents(2)
	if len(got) != 2 || len(told) != 2 || told[0] != "Conflict" || told[1] != "ApplyFailed" {
		t.Errorf("%d Events, told %v; want 2 Events, told [Conflict ApplyFailed]", len(got), told)
	}
}
