//go:build !race

package race

// Enabled says the race detector is on (on.go).
const Enabled = false
