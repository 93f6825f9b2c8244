//go:build race

package contract

// raceEnabled says the race detector is on: sync.Pool then drops items at random, so code that
// reuses pooled values (regexp matchers) allocates, and allocation counts do not hold.
const raceEnabled = true
