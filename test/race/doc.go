// Package race tells tests whether the race detector is on. Under it, sync.Pool drops pooled
// values at random, so code that reuses pooled values (regexp's matchers, the view's list
// writers) allocates anyway, and tests that count allocations skip the count.
package race
