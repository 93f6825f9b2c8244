//go:build !race

package contract

// raceEnabled says the race detector is on (race_test.go).
const raceEnabled = false
