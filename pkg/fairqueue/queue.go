// Package fairqueue is a work queue shared by tenants (a tenant is a namespace of the source,
// in its logical cluster) that no tenant can monopolize: the CEL work of one tenant's
// Customizations or StatusCollectors delays that tenant's work only (docs/customization.md
// and docs/status.md, "Fairness and budgets").
//
// Its semantics are those of client-go's workqueue (a key is queued at most once; a key added
// while it is being processed is processed again after Done), with three differences:
//
//   - the keys of a tenant are served in the order they were added, and the tenants with work
//     in turn (round-robin): a tenant with a thousand keys queued delays another tenant's key
//     by at most one key of its own per worker, not by a thousand;
//   - a tenant has at most one key in flight, so one tenant's slow work occupies one worker,
//     never all of them;
//   - each tenant has a budget of cost per second (a token bucket, golang.org/x/time/rate): the
//     worker reports what a key cost when it is Done, and a tenant that spent more than its
//     budget is not served until the bucket refilled (Throttled).
package fairqueue

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// Options configure a Queue.
type Options struct {
	// CostPerSecond is each tenant's budget of cost per second (the unit is the caller's: CEL
	// cost units for rendering and summaries). 0 or less: no budget.
	CostPerSecond int64
	// Burst is the cost a tenant that spent nothing for a while may spend at once (the bucket's
	// size); at least CostPerSecond. A key that costs more is still processed (the cost is
	// known only afterwards): the tenant then waits until its debt is paid back.
	Burst int64
	// Clock is the time source (tests use a fake clock); default the real clock.
	Clock clock.WithTicker
}

// Queue is a fair work queue of keys of type K grouped by tenant. Safe for concurrent use.
type Queue[K comparable] struct {
	opts  Options
	clock clock.WithTicker

	mu      sync.Mutex
	tenants map[string]*tenant[K]
	// ready are the tenants with queued keys and nothing in flight, in the order they are
	// served (a tenant goes to the back after each key).
	ready []*tenant[K]
	// wake is closed (and replaced) when a key becomes available to Get.
	wake     chan struct{}
	shutdown bool
}

// tenant is one tenant's state.
type tenant[K comparable] struct {
	name string
	// keys are the queued keys, in order; queued holds them as a set.
	keys   []K
	queued map[K]bool
	// inFlight is the key being processed, if busy; dirty says it was added again meanwhile.
	inFlight K
	busy     bool
	dirty    bool
	// inReady says the tenant is in the queue's ready list.
	inReady bool
	// limiter is the tenant's cost budget (nil: none).
	limiter *rate.Limiter
}

// New returns an empty Queue.
func New[K comparable](opts Options) *Queue[K] {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.CostPerSecond > 0 && opts.Burst < opts.CostPerSecond {
		opts.Burst = opts.CostPerSecond
	}
	return &Queue[K]{opts: opts, clock: opts.Clock, tenants: map[string]*tenant[K]{}, wake: make(chan struct{})}
}

// Add queues key for tenant. A key already queued is not queued twice; a key in flight is
// queued again once it is Done.
func (q *Queue[K]) Add(tenantName string, key K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	t := q.tenantLocked(tenantName)
	if t.busy && t.inFlight == key {
		t.dirty = true
		return
	}
	if t.queued[key] {
		return
	}
	t.queued[key] = true
	t.keys = append(t.keys, key)
	q.readyLocked(t)
}

// tenantLocked returns the state of name, creating it.
func (q *Queue[K]) tenantLocked(name string) *tenant[K] {
	t := q.tenants[name]
	if t == nil {
		t = &tenant[K]{name: name, queued: map[K]bool{}}
		if q.opts.CostPerSecond > 0 {
			t.limiter = rate.NewLimiter(rate.Limit(q.opts.CostPerSecond), clampInt(q.opts.Burst))
		}
		q.tenants[name] = t
	}
	return t
}

// readyLocked puts t at the back of the ready list when it has queued keys and nothing in
// flight, and wakes a waiting Get.
func (q *Queue[K]) readyLocked(t *tenant[K]) {
	if t.inReady || t.busy || len(t.keys) == 0 || q.shutdown {
		return
	}
	t.inReady = true
	q.ready = append(q.ready, t)
	close(q.wake)
	q.wake = make(chan struct{})
}

// Get waits for the next key to process and returns it with its tenant; ok is false when ctx
// ended or the queue was shut down. The caller must call Done(tenant, key, cost) once it has
// processed the key.
func (q *Queue[K]) Get(ctx context.Context) (tenantName string, key K, ok bool) {
	for {
		q.mu.Lock()
		if q.shutdown {
			q.mu.Unlock()
			return "", key, false
		}
		t, wait := q.nextLocked()
		if t != nil {
			key = t.keys[0]
			var zero K
			t.keys[0] = zero
			t.keys = t.keys[1:]
			delete(t.queued, key)
			t.busy, t.inFlight, t.dirty = true, key, false
			q.mu.Unlock()
			return t.name, key, true
		}
		wake := q.wake
		q.mu.Unlock()
		var timer <-chan time.Time
		if wait > 0 {
			timer = q.clock.After(wait)
		}
		select {
		case <-ctx.Done():
			return "", key, false
		case <-wake:
		case <-timer:
		}
	}
}

// nextLocked removes and returns the first ready tenant whose budget is not spent; else nil and
// how long until the first throttled tenant may be served again (0: no tenant waits).
func (q *Queue[K]) nextLocked() (*tenant[K], time.Duration) {
	now := q.clock.Now()
	wait := time.Duration(0)
	for i, t := range q.ready {
		if d := t.throttledFor(now); d > 0 {
			if wait == 0 || d < wait {
				wait = d
			}
			continue
		}
		q.ready = append(q.ready[:i:i], q.ready[i+1:]...)
		t.inReady = false
		return t, 0
	}
	return nil, wait
}

// throttledFor returns how long t must wait until its budget allows work again (0: now).
func (t *tenant[K]) throttledFor(now time.Time) time.Duration {
	if t.limiter == nil {
		return 0
	}
	tokens := t.limiter.TokensAt(now)
	if tokens > 0 {
		return 0
	}
	// Until the debt is paid back and one token more, rounded up to a millisecond.
	d := time.Duration((1 - tokens) / float64(t.limiter.Limit()) * float64(time.Second))
	return max(d, time.Millisecond)
}

// Done ends the processing of key of tenant, which cost cost (in the unit of
// Options.CostPerSecond; charged to the tenant's budget). The tenant goes to the back of the
// ready list when it has more keys (key itself when it was added meanwhile).
func (q *Queue[K]) Done(tenantName string, key K, cost int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	t := q.tenants[tenantName]
	if t == nil || !t.busy || t.inFlight != key {
		return
	}
	var zero K
	t.busy, t.inFlight = false, zero
	if t.limiter != nil && cost > 0 {
		charge(t.limiter, q.clock.Now(), cost)
	}
	if t.dirty {
		t.dirty = false
		if !t.queued[key] {
			t.queued[key] = true
			t.keys = append(t.keys, key)
		}
	}
	if len(t.keys) > 0 {
		q.readyLocked(t)
		return
	}
	if t.limiter == nil || t.limiter.TokensAt(q.clock.Now()) >= float64(t.limiter.Burst()) {
		// Idle with a full bucket: nothing to remember.
		delete(q.tenants, tenantName)
	}
}

// Charge charges cost to tenant's budget now (a caller that knows a cost before its key is
// Done, and wants to know its effect) and reports whether the tenant is throttled after it.
func (q *Queue[K]) Charge(tenantName string, cost int64) (throttled bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	t := q.tenantLocked(tenantName)
	if t.limiter == nil {
		return false
	}
	now := q.clock.Now()
	if cost > 0 {
		charge(t.limiter, now, cost)
	}
	return t.throttledFor(now) > 0
}

// charge takes cost tokens from l at now, going into debt as far as needed (a reservation
// takes at most the burst at once).
func charge(l *rate.Limiter, now time.Time, cost int64) {
	burst := int64(l.Burst())
	for cost > 0 {
		n := min(cost, burst)
		l.ReserveN(now, int(n))
		cost -= n
	}
}

// Throttled reports whether tenant has spent its budget: its keys wait until the bucket
// refilled.
func (q *Queue[K]) Throttled(tenantName string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	t := q.tenants[tenantName]
	return t != nil && t.throttledFor(q.clock.Now()) > 0
}

// Len returns the number of queued keys (not counting those in flight).
func (q *Queue[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, t := range q.tenants {
		n += len(t.keys)
	}
	return n
}

// ShutDown makes every Get return false; keys added afterwards are dropped.
func (q *Queue[K]) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	q.shutdown = true
	close(q.wake)
}

// clampInt returns n as an int, at most math.MaxInt32 (rate.Limiter's burst is an int; a
// larger burst means no practical limit).
func clampInt(n int64) int {
	return int(min(max(n, 1), math.MaxInt32))
}
