package locationevents

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestRecorder runs the Recorder against a real kube-apiserver: a deletion still pending after
// the delay gets one Event naming the location, reported twice (two replicas, a restart) it is
// still one Event, and a deletion no longer pending gets none.
func TestRecorder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source"})
	dyn, err := dynamic.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfig
	k, err := kube(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	waiting := cache.PendingDeletion{GVR: gvr, Cluster: "default", Namespace: "apps", Name: "web", UID: types.UID("uid-1"), Location: "east"}
	released := waiting
	released.Location = "west"
	r := New(Config{
		Client:   func(string) (dynamic.Interface, error) { return dyn, nil },
		Still:    func(p cache.PendingDeletion) bool { return p.Location == "east" },
		Kind:     func(schema.GroupVersionResource) (string, string) { return "v1", "ConfigMap" },
		Delay:    100 * time.Millisecond,
		Instance: "test",
	})
	go r.Run(ctx)
	r.Pending(waiting)
	r.Pending(released)
	r.Pending(waiting)
	var events []string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := k.EventsV1().Events("apps").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		events = nil
		for _, e := range list.Items {
			events = append(events, e.Name+" "+e.Reason+" "+e.Regarding.Kind+"/"+e.Regarding.Name+": "+e.Note)
		}
		return len(events) > 0 && r.queue.Len() == 0, nil
	}); err != nil {
		t.Fatalf("no Event recorded: %v", err)
	}
	if len(events) != 1 || !strings.HasPrefix(events[0], EventName(waiting)+" "+Reason+" ConfigMap/web: ") || !strings.Contains(events[0], "location east") {
		t.Fatalf("events %q, want one naming east", events)
	}
}
