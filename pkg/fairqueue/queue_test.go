package fairqueue

import (
	"context"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// get returns the next tenant and key, failing the test when none comes within a second.
func get(t *testing.T, q *Queue[string]) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	tenant, key, ok := q.Get(ctx)
	if !ok {
		t.Fatalf("no key")
	}
	return tenant, key
}

// none checks that Get has nothing to give now.
func none(t *testing.T, q *Queue[string]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if tenant, key, ok := q.Get(ctx); ok {
		t.Fatalf("unexpected key %s/%s", tenant, key)
	}
}

// TestRoundRobinOneInFlight: tenants are served in turn, whatever their backlog, and a tenant
// has one key in flight at most.
func TestRoundRobinOneInFlight(t *testing.T) {
	q := New[string](Options{})
	for _, k := range []string{"a1", "a2", "a3", "a4"} {
		q.Add("a", k)
	}
	q.Add("b", "b1")
	q.Add("b", "b2")

	tn, k := get(t, q)
	if tn != "a" || k != "a1" {
		t.Fatalf("first: %s/%s", tn, k)
	}
	// a is busy: b is next, then nothing (b busy too).
	if tn, k := get(t, q); tn != "b" || k != "b1" {
		t.Fatalf("second: %s/%s, want b/b1", tn, k)
	}
	none(t, q)
	q.Done("a", "a1", 0)
	q.Done("b", "b1", 0)
	var order []string
	for i := 0; i < 4; i++ {
		tn, k := get(t, q)
		order = append(order, k)
		q.Done(tn, k, 0)
	}
	if got := order; got[0] != "a2" || got[1] != "b2" || got[2] != "a3" || got[3] != "a4" {
		t.Fatalf("order %v, want a2 b2 a3 a4", got)
	}
	none(t, q)
}

// TestAddWhileInFlight: a key added while in flight is processed again after Done, once.
func TestAddWhileInFlight(t *testing.T) {
	q := New[string](Options{})
	q.Add("a", "k")
	_, k := get(t, q)
	q.Add("a", "k")
	q.Add("a", "k")
	none(t, q)
	q.Done("a", k, 0)
	if _, k2 := get(t, q); k2 != "k" {
		t.Fatalf("got %s", k2)
	}
	q.Done("a", "k", 0)
	none(t, q)
	if q.Len() != 0 {
		t.Fatalf("Len %d", q.Len())
	}
}

// TestBudgetThrottlesTheSpender: a tenant that spent more than its budget waits until its
// bucket refilled; another tenant is served meanwhile.
func TestBudgetThrottlesTheSpender(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	q := New[string](Options{CostPerSecond: 100, Burst: 100, Clock: clk})
	q.Add("a", "a1")
	q.Add("a", "a2")
	q.Add("b", "b1")
	tn, k := get(t, q)
	q.Done(tn, k, 1000) // a: 900 in debt, 9 s to pay back
	if !q.Throttled("a") {
		t.Fatal("a not throttled")
	}
	if tn, k := get(t, q); tn != "b" {
		t.Fatalf("got %s/%s, want b's", tn, k)
	}
	q.Done("b", "b1", 10)
	none(t, q)
	clk.Step(8 * time.Second)
	none(t, q)
	clk.Step(2 * time.Second)
	if tn, k := get(t, q); tn != "a" || k != "a2" {
		t.Fatalf("got %s/%s, want a/a2", tn, k)
	}
	if q.Throttled("a") {
		t.Fatal("a still throttled")
	}
}

// TestShutDown ends every Get.
func TestShutDown(t *testing.T) {
	q := New[string](Options{})
	done := make(chan bool)
	go func() {
		_, _, ok := q.Get(context.Background())
		done <- ok
	}()
	q.ShutDown()
	if <-done {
		t.Fatal("Get returned a key after ShutDown")
	}
	q.Add("a", "k")
	none(t, q)
}
