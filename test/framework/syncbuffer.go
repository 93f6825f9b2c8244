package framework

import (
	"strings"
	"sync"
)

// SyncBuffer collects what a process or a logger writes (an exec.Cmd's Stderr, copied by
// os/exec's own goroutine; klog's output) while the test reads it: Write and String may be
// called concurrently. The zero
// value is empty and ready to use.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
