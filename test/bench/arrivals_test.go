package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestArrivalsResumeEndedWatches: the target ends the configmaps watch after 3 of 5 objects
// arrived (as kube-apiserver ends a watch whose consumer falls behind); the count resumes it from
// the last resourceVersion and sees all 5, each once. The deployments watch cannot resume (410):
// the deployments are counted by LIST. Counting the first watches only, as scenario 6 did,
// stops at 4 of the 9 objects.
func TestArrivalsResumeEndedWatches(t *testing.T) {
	var mu sync.Mutex
	resumedFrom := map[string][]string{}
	event := func(w http.ResponseWriter, typ string, rv int) {
		fmt.Fprintf(w, `{"type":%q,"object":{"kind":"ConfigMap","metadata":{"resourceVersion":"%d"}}}`+"\n", typ, rv)
		w.(http.Flusher).Flush()
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rv := r.URL.Query().Get("resourceVersion")
		if r.URL.Query().Get("watch") != "true" {
			fmt.Fprint(w, `{"kind":"DeploymentList","items":[{},{},{},{}]}`)
			return
		}
		mu.Lock()
		resumedFrom[r.URL.Path] = append(resumedFrom[r.URL.Path], rv)
		mu.Unlock()
		switch r.URL.Path + "@" + rv {
		case "/api/v1/configmaps@100":
			for i := 101; i <= 103; i++ {
				event(w, "ADDED", i)
			}
			return // the server ends the watch
		case "/api/v1/configmaps@103":
			event(w, "ADDED", 104)
			event(w, "BOOKMARK", 110)
			event(w, "ADDED", 111)
			<-r.Context().Done()
		case "/apis/apps/v1/deployments@100":
			event(w, "ADDED", 101)
			return
		default:
			fmt.Fprint(w, `{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}`+"\n")
		}
	}))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := &arrivals{ctx: ctx, base: srv.URL, selector: "kcp.io%2Flocation%3Dbulk",
		open: func(ctx context.Context, name, url string) (*watchStream, error) {
			return openWatch(ctx, name, srv.Client(), nil, url)
		},
		list: func(ctx context.Context, url string) ([]byte, error) { return getBody(ctx, srv.Client(), url) },
	}
	defer a.stop()
	for _, path := range []string{"/api/v1/configmaps", "/apis/apps/v1/deployments"} {
		if err := a.watch(path, 100); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		n, _ = a.count()
		return n == 9, nil
	}); err != nil {
		t.Fatalf("counted %d arrivals, want 9 (5 configmaps by watch, 4 deployments by LIST)", n)
	}
	if watches, listed := a.reopened(); watches != 2 || listed != 1 {
		t.Errorf("reopened %d watches and listed %d resources, want 2 and 1", watches, listed)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := fmt.Sprint(resumedFrom["/api/v1/configmaps"]); got != "[100 103]" {
		t.Errorf("the configmaps watches started at %s, want [100 103]", got)
	}
}
