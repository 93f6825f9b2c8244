package view

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// watchLimiter bounds the concurrent watches one user holds on one location's view:
// without a bound, one identity can open any number of watches over one connection.
type watchLimiter struct {
	max int
	mu  sync.Mutex
	// open counts the watches per (user, location).
	open map[watchKey]int
}

type watchKey struct{ user, location string }

// newWatchLimiter returns a limiter of max concurrent watches per user and location; max <= 0
// means no limit.
func newWatchLimiter(max int) *watchLimiter {
	return &watchLimiter{max: max, open: map[watchKey]int{}}
}

// acquire counts one more watch of user on location. It returns the function that ends the
// count, or a 429 TooManyRequests Status that names the user, the location and the limit when
// the user already holds max watches there.
func (l *watchLimiter) acquire(user, location string) (func(), error) {
	if l.max <= 0 {
		return func() {}, nil
	}
	k := watchKey{user: user, location: location}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[k] >= l.max {
		return nil, apierrors.NewTooManyRequests(fmt.Sprintf(
			"too many concurrent watches: user %q already holds %d watches on the view of location %q, the most one user may hold there is %d (mapper-apiserver --max-watches-per-user); close watches it no longer needs (one informer per resource is enough)",
			user, l.open[k], location, l.max), 1)
	}
	l.open[k]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.open[k] <= 1 {
				delete(l.open, k)
			} else {
				l.open[k]--
			}
		})
	}, nil
}

// capWatchTimeout bounds how long a view watch stays open on the server, so that a revoked
// permission ends every watch it admitted within a known time. As
// kube-apiserver's --min-request-timeout, the bound is randomised in [min, 2*min) to spread
// re-watches; unlike kube-apiserver, a client's timeoutSeconds larger than the bound is reduced
// to it (a smaller one, or none, is left alone: without one, the handler picks the same random
// bound). query is changed in place; random returns a float in [0, 1).
func capWatchTimeout(query url.Values, min time.Duration, random func() float64) {
	if min <= 0 {
		return
	}
	raw := query.Get("timeoutSeconds")
	if raw == "" {
		return
	}
	secs, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return // the handler answers 400 for it
	}
	bound := time.Duration(float64(min) * (random() + 1.0))
	if time.Duration(secs)*time.Second > bound {
		query.Set("timeoutSeconds", strconv.FormatInt(int64(bound/time.Second), 10))
	}
}

// randomFloat is the source of capWatchTimeout's randomisation.
func randomFloat() float64 { return rand.Float64() }
