package view

import (
	"net/url"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TestWatchLimiter: past max watches of one user on one location a 429 names the limit; other
// users and locations are counted apart, and a released watch frees its slot once.
func TestWatchLimiter(t *testing.T) {
	l := newWatchLimiter(2)
	r1, err := l.acquire("alice", "east")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.acquire("alice", "east"); err != nil {
		t.Fatal(err)
	}
	_, err = l.acquire("alice", "east")
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), `"alice"`) || !strings.Contains(err.Error(), `"east"`) || !strings.Contains(err.Error(), "--max-watches-per-user") {
		t.Fatalf("third watch: want 429 naming user, location and flag, got %v", err)
	}
	if _, err := l.acquire("alice", "west"); err != nil {
		t.Errorf("another location is counted apart: %v", err)
	}
	if _, err := l.acquire("bob", "east"); err != nil {
		t.Errorf("another user is counted apart: %v", err)
	}
	r1()
	r1() // a second release must not free another slot
	if _, err := l.acquire("alice", "east"); err != nil {
		t.Errorf("after a release: %v", err)
	}
	if _, err := l.acquire("alice", "east"); !apierrors.IsTooManyRequests(err) {
		t.Errorf("a double release freed two slots: %v", err)
	}
}

// TestCapWatchTimeout: a client's timeoutSeconds above the randomised bound is reduced to it.
func TestCapWatchTimeout(t *testing.T) {
	cases := []struct {
		in, want string
		random   float64
	}{
		{"100000", "450", 0.5}, // 300s * 1.5
		{"100000", "300", 0},
		{"200", "200", 0.5}, // below the bound: unchanged
		{"", "", 0.5},       // none: the handler picks the same bound
		{"-5", "-5", 0.5},
		{"x", "x", 0.5},
	}
	for _, c := range cases {
		q := url.Values{}
		if c.in != "" {
			q.Set("timeoutSeconds", c.in)
		}
		capWatchTimeout(q, 300*time.Second, func() float64 { return c.random })
		if got := q.Get("timeoutSeconds"); got != c.want {
			t.Errorf("timeoutSeconds=%q: got %q, want %q", c.in, got, c.want)
		}
	}
}
