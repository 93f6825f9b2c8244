package cache

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestWaitUntilSynced: before the first sync a read waits up to
// the timeout, then gets 429 (still listing, or the source refused the list) or 503 (the source
// was not reached) with a Retry-After; the first sync releases waiting reads; never an empty
// answer.
func TestWaitUntilSynced(t *testing.T) {
	s := newTestStore(t, StoreOptions{})

	start := time.Now()
	err := s.WaitUntilSynced(context.Background(), 100*time.Millisecond)
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("unsynced: got %v, want 429", err)
	}
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Fatalf("answered after %v, before the timeout", waited)
	}
	if secs, ok := apierrors.SuggestsClientDelay(err); !ok || secs < 1 || secs > 30 {
		t.Fatalf("Retry-After %d (%v), want 1-30 s", secs, ok)
	}

	s.setSyncError(apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("RBAC says no")))
	err = s.WaitUntilSynced(context.Background(), 10*time.Millisecond)
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "RBAC says no") {
		t.Fatalf("refused by the source: got %v, want 429 naming the source's error", err)
	}

	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	s.setSyncError(refused)
	err = s.WaitUntilSynced(context.Background(), 10*time.Millisecond)
	if !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("source unreachable: got %v, want 503", err)
	}
	if secs, ok := apierrors.SuggestsClientDelay(err); !ok || secs < 1 {
		t.Fatalf("503 without Retry-After: %d %v", secs, ok)
	}

	// The first sync releases a waiting read at once.
	done := make(chan error, 1)
	go func() { done <- s.WaitUntilSynced(context.Background(), time.Minute) }()
	waitWaiters(t, s, 1)
	s.setSyncError(nil)
	mustReplace(t, s, 5, cm("ns", "a", 5, locs("east")))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after the sync: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the sync did not release the waiting read")
	}
	if s.SyncError() != nil {
		t.Fatalf("sync error kept after a successful list: %v", s.SyncError())
	}
	if err := s.WaitUntilSynced(context.Background(), 0); err != nil {
		t.Fatalf("synced store, no wait: %v", err)
	}

	// A caller that gives up gets its own error; a closed store is a 503.
	u := newTestStore(t, StoreOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := u.WaitUntilSynced(ctx, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled caller: %v", err)
	}
	u.Close()
	if err := u.WaitUntilSynced(context.Background(), time.Minute); !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("closed store: %v", err)
	}
}

func TestRetryAfterUnsynced(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{{0, 1}, {10 * time.Second, 1}, {30 * time.Second, 6}, {time.Minute, 30}, {time.Hour, 30}} {
		if got := retryAfterUnsynced(c.d); got != c.want {
			t.Errorf("retryAfterUnsynced(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}
