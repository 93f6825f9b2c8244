package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/mapper/heartbeat"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// syncTargetRequests records the heartbeat's requests to SyncTargets as "GET rv=<value>" and
// "PUT <status code>", in order.
type syncTargetRequests struct {
	mu   sync.Mutex
	seen []string
}

// wrap returns a transport over next that records into r (rest.Config.WrapTransport).
func (r *syncTargetRequests) wrap(next http.RoundTripper) http.RoundTripper {
	return recordingTransport{next: next, log: r}
}

// recordingTransport records the SyncTarget requests that pass through it.
type recordingTransport struct {
	next http.RoundTripper
	log  *syncTargetRequests
}

func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if strings.Contains(req.URL.Path, "/synctargets/") {
		entry := req.Method + " rv=" + req.URL.Query().Get("resourceVersion")
		if req.Method == http.MethodPut && err == nil {
			entry = fmt.Sprintf("%s %d", req.Method, resp.StatusCode)
		}
		t.log.mu.Lock()
		t.log.seen = append(t.log.seen, entry)
		t.log.mu.Unlock()
	}
	return resp, err
}

func (r *syncTargetRequests) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// TestHeartbeatReadsSyncTargetFromCache checks how a location's heartbeat reads its SyncTarget
// on a real kube-apiserver: every renewal reads it from the watch cache (resourceVersion=0, as
// the kubelet reads its Node), so 1,000 locations do not make 100 quorum reads of etcd a
// second; after a status write that failed with 409 Conflict, the next read goes to etcd and
// the write then succeeds. The conflict is made by a second writer between the heartbeat's
// read and its write (inside Observe).
func TestHeartbeatReadsSyncTargetFromCache(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, dyn := startControlSource(t, ctx)
	framework.EnsureNamespace(t, ctx, cp, heartbeat.DefaultLeaseNamespace)
	const name = "east"
	if _, err := dyn.Resource(synctarget.Resource).Create(ctx, newSyncTarget(name, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other := synctarget.NewClient(dyn)
	// The heartbeat's first read must find it in the watch cache.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := other.GetCachedStatus(ctx, name)
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the SyncTarget never reached the watch cache: %v", err)
	}

	recorded := &syncTargetRequests{}
	cfg := cp.AdminConfig()
	cfg.WrapTransport = recorded.wrap
	var calls int
	observed := make(chan int, 16)
	hbCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = heartbeat.Run(hbCtx, heartbeat.Config{
			Location: name, Identity: "test-mapper", Version: "test", Mode: controlv1alpha1.ModePull,
			Source: cfg, RenewInterval: time.Second, StatusInterval: time.Hour,
			Observe: func(ctx context.Context, _ bool) heartbeat.Observation {
				calls++
				if calls == 1 {
					// Another writer changes the status between the heartbeat's read and write.
					st, err := other.GetStatus(ctx, name)
					if err != nil {
						t.Error(err)
					} else {
						meta.SetStatusCondition(&st.Status.Conditions, metav1.Condition{Type: "Other", Status: metav1.ConditionTrue, Reason: "Test"})
						if _, err := other.UpdateStatus(ctx, st); err != nil {
							t.Error(err)
						}
					}
				}
				observed <- calls
				return heartbeat.Observation{Ready: metav1.ConditionTrue, Reason: controlv1alpha1.ReasonMapperReady, Message: "test"}
			},
		})
	}()
	defer func() { stop(); <-done }()
	// Four ticks: the conflicting write, the write after the quorum read, two unchanged ones.
	for n := 0; n < 4; {
		select {
		case n = <-observed:
		case <-ctx.Done():
			t.Fatalf("the heartbeat observed %d times; requests: %v", n, recorded.list())
		}
	}
	stop()
	<-done

	want := []string{"GET rv=0", "PUT 409", "GET rv=", "PUT 200", "GET rv=0", "GET rv=0"}
	got := recorded.list()
	if len(got) < len(want) || strings.Join(got[:len(want)], ", ") != strings.Join(want, ", ") {
		t.Fatalf("SyncTarget requests = %v, want them to begin with %v", got, want)
	}
	st, err := other.GetStatus(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(st.Status.Conditions, controlv1alpha1.SyncTargetReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready after the retried write = %+v, want True", c)
	}
	if meta.FindStatusCondition(st.Status.Conditions, "Other") == nil {
		t.Errorf("the other writer's condition was lost: %+v", st.Status.Conditions)
	}
}
