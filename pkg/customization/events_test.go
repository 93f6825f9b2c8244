package customization

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/util/flowcontrol"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cluster-mapper/cluster-mapper/pkg/rendercheck"
)

// TestEventWriter: one Warning Event per refused (object version, location, producer), in the
// object's namespace and logical cluster, naming the location and the producer; not again while
// the refusal lasts; again for a new version; at most the burst in one round, the rest in
// later rounds.
func TestEventWriter(t *testing.T) {
	clients := map[string]*dynamicfake.FakeDynamicClient{}
	client := func(cluster string) (dynamic.Interface, error) {
		if clients[cluster] == nil {
			clients[cluster] = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{eventsResource: "EventList"})
		}
		return clients[cluster], nil
	}
	refusal := func(cluster, name, rv, customization string) RefusedRendering {
		return RefusedRendering{Cluster: cluster, Location: "east", Customization: customization,
			Object: corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: "tenant-a", Name: name, UID: types.UID("u-" + name), ResourceVersion: rv},
			Reason: rendercheck.ReasonProtectedFieldChanged, Message: "changes /metadata"}
	}
	current := []RefusedRendering{refusal("c1", "o", "1", ""), refusal("c2", "o", "1", "hostile")}
	w := NewEventWriter(func() []RefusedRendering { return current }, client, time.Second)
	clk := testingclock.NewFakeClock(time.Now())
	w.limiter = flowcontrol.NewTokenBucketRateLimiterWithClock(eventQPS, eventBurst, clk)
	ctx := context.Background()
	events := func(cluster string) []eventsv1.Event {
		c, _ := client(cluster)
		l, err := c.Resource(eventsResource).Namespace("tenant-a").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := make([]eventsv1.Event, len(l.Items))
		for i := range l.Items {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(l.Items[i].Object, &out[i]); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}

	w.Sync(ctx)
	w.Sync(ctx)
	for cluster, by := range map[string]string{"c1": "spec-diff.kcp.io/east patch", "c2": "Customization hostile"} {
		evs := events(cluster)
		if len(evs) != 1 {
			t.Fatalf("%s: %d Events after two rounds, want 1", cluster, len(evs))
		}
		e := evs[0]
		if e.Type != corev1.EventTypeWarning || e.Reason != rendercheck.ReasonProtectedFieldChanged || e.Regarding.UID != "u-o" ||
			e.Regarding.ResourceVersion != "1" || !strings.Contains(e.Note, by) || !strings.Contains(e.Note, "east") ||
			e.ReportingController == "" || e.ReportingInstance == "" || e.Action == "" || e.EventTime.IsZero() {
			t.Errorf("%s: Event %+v", cluster, e)
		}
	}

	// A new version is a new refusal; the old one is forgotten.
	current = []RefusedRendering{refusal("c1", "o", "2", "")}
	w.Sync(ctx)
	if n := len(events("c1")); n != 2 {
		t.Errorf("after a new version: %d Events, want 2", n)
	}
	if len(w.reported) != 1 {
		t.Errorf("%d refusals remembered, want the current one", len(w.reported))
	}

	// A flood: the burst now, the rest later.
	current = nil
	for i := 0; i < eventBurst+20; i++ {
		current = append(current, refusal("c3", "flood-"+strings.Repeat("x", i%3)+string(rune('a'+i%26))+string(rune('a'+i/26)), "1", ""))
	}
	w.Sync(ctx)
	first := len(events("c3"))
	if first > eventBurst {
		t.Errorf("%d Events in one round, want at most %d", first, eventBurst)
	}
	clk.Step(time.Second) // eventQPS more
	w.Sync(ctx)
	if n := len(events("c3")); n != first+eventQPS {
		t.Errorf("%d Events a second later, want %d", n, first+eventQPS)
	}
	clk.Step(time.Minute)
	w.Sync(ctx)
	if n := len(events("c3")); n != len(current) {
		t.Errorf("%d Events in the end, want %d", n, len(current))
	}
}

// TestEventName: valid names for long names and names ending in a separator.
func TestEventName(t *testing.T) {
	now := time.Unix(0, 0x1234)
	if got := eventName("web", now); got != "web.1234" {
		t.Errorf("eventName = %q", got)
	}
	long := strings.Repeat("a", 199) + "-b" + strings.Repeat("c", 50)
	if got := eventName(long, now); len(got) > 253 || strings.Contains(got, "-.") {
		t.Errorf("eventName of a long name = %q", got)
	}
}
