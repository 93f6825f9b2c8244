package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestViewWatchLimits: one user's concurrent watches on one location are bounded
// (--max-watches-per-user, 429 past it), and a client's long timeoutSeconds is cut to the
// server's bound (--min-request-timeout, randomised in [t, 2t)).
func TestViewWatchLimits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	source, src := startSource(t)
	ensureNamespace(t, ctx, src, "apps")
	env := &viewEnv{source: source, src: src, views: map[string]dynamic.Interface{}}
	env.create(t, ctx, configMapsGVR, newConfigMap("apps", "one", "east", "west"))
	// client-go retries a 429 with Retry-After (1 s) up to 10 times, so the three watches must
	// outlive those retries: the cap is at least 20 s.
	const minRequestTimeout = 20
	env.server = framework.StartMapperAPIServer(t, source, "--resources=configmaps", "--max-watches-per-user=3", fmt.Sprintf("--min-request-timeout=%d", minRequestTimeout))
	env.connectViews(t, "east", "west")
	east := env.views["east"].Resource(configMapsGVR)

	// Long timeouts, so that only the limit ends anything here.
	long := int64(600)
	opened := []watch.Interface{}
	for i := 0; i < 3; i++ {
		w, err := east.Watch(ctx, metav1.ListOptions{TimeoutSeconds: &long})
		if err != nil {
			t.Fatalf("watch %d of 3: %v", i+1, err)
		}
		opened = append(opened, w)
	}
	_, err := east.Watch(ctx, metav1.ListOptions{TimeoutSeconds: &long})
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "--max-watches-per-user") {
		t.Fatalf("the 4th concurrent watch of one user on east: want 429 naming --max-watches-per-user, got %v", err)
	}
	t.Logf("4th watch: %v", err)
	if w, err := env.views["west"].Resource(configMapsGVR).Watch(ctx, metav1.ListOptions{TimeoutSeconds: &long}); err != nil {
		t.Errorf("a watch on another location is counted apart: %v", err)
	} else {
		defer w.Stop()
	}
	// Closing one frees its slot (once the server saw the connection end).
	opened[0].Stop()
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		w, err := east.Watch(ctx, metav1.ListOptions{TimeoutSeconds: &long})
		if err != nil {
			return false, nil
		}
		opened[0] = w
		return true, nil
	})
	if err != nil {
		t.Fatalf("a closed watch's slot was not freed: %v", err)
	}
	for _, w := range opened {
		w.Stop()
	}

	// timeoutSeconds=3600 is cut to [20s, 40s): the stream ends by itself.
	hour := int64(3600)
	var w watch.Interface
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		// The test's context, not the poll's: the watch outlives the poll.
		w, err = east.Watch(ctx, metav1.ListOptions{TimeoutSeconds: &hour, ResourceVersion: "0"})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("watch with timeoutSeconds=3600: %v", err)
	}
	start := time.Now()
	deadline := time.After(2*minRequestTimeout*time.Second + 20*time.Second)
	for open := true; open; {
		select {
		case ev, ok := <-w.ResultChan():
			open = ok
			if ok {
				t.Logf("after %v: %s", time.Since(start).Round(time.Millisecond), ev.Type)
				if ev.Type == watch.Error {
					t.Fatalf("the watch with timeoutSeconds=3600 failed: %v", apierrors.FromObject(ev.Object))
				}
			}
		case <-deadline:
			w.Stop()
			t.Fatalf("a watch with timeoutSeconds=3600 is still open after %v: the server does not cap watch durations", time.Since(start))
		}
	}
	took := time.Since(start)
	t.Logf("a watch asking for timeoutSeconds=3600 ended after %v (bound [%ds, %ds))", took.Round(10*time.Millisecond), minRequestTimeout, 2*minRequestTimeout)
	if took < minRequestTimeout*time.Second-time.Second {
		t.Errorf("the watch ended after %v, before the lower bound %ds", took, minRequestTimeout)
	}
}
