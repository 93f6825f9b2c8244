// Package programtb lets a program (the demo, the benchmark) use the test framework outside
// `go test`: it implements framework.TB with cleanups that run when the program stops.
package programtb

import (
	"fmt"
	"os"
	"sync"
)

// TB implements framework.TB for a program. Fatal and Fatalf print the message, run the
// cleanups and exit with status 1; Cleanup functions run, last added first, on Fatal or when
// the program calls Close. It is safe for concurrent use.
type TB struct {
	mu       sync.Mutex
	dir      string
	cleanups []func()
	failed   bool
	closed   bool
}

// New returns a TB whose TempDir directories are made below a new directory under base
// (os.TempDir() when empty); Close removes them.
func New(base string) (*TB, error) {
	dir, err := os.MkdirTemp(base, "cluster-mapper-")
	if err != nil {
		return nil, err
	}
	return &TB{dir: dir}, nil
}

// Helper does nothing: a program has no test helpers to hide from stack traces.
func (t *TB) Helper() {}

// Cleanup registers f to run at Close (or on Fatal), last added first.
func (t *TB) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// Error prints args and marks the program failed.
func (t *TB) Error(args ...any) {
	fmt.Fprintln(os.Stderr, args...)
	t.markFailed()
}

// Errorf prints the message and marks the program failed.
func (t *TB) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	t.markFailed()
}

// Fatal prints args, runs the cleanups and exits with status 1.
func (t *TB) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, args...)
	t.exit()
}

// Fatalf prints the message, runs the cleanups and exits with status 1.
func (t *TB) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	t.exit()
}

// Skip is fatal in a program: there is no test to skip.
func (t *TB) Skip(args ...any) { t.Fatal(append([]any{"cannot continue:"}, args...)...) }

// Failed reports whether Error or Errorf was called.
func (t *TB) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

// Logf prints the message.
func (t *TB) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// TempDir returns a new directory below the TB's directory, removed at Close.
func (t *TB) TempDir() string {
	d, err := os.MkdirTemp(t.dir, "tmp-")
	if err != nil {
		t.Fatalf("creating a temporary directory: %v", err)
	}
	return d
}

// Close runs the cleanups, last added first, and removes the temporary directories. Calling
// it again does nothing.
func (t *TB) Close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	cleanups := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	_ = os.RemoveAll(t.dir)
}

func (t *TB) markFailed() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
}

func (t *TB) exit() {
	t.markFailed()
	t.Close()
	os.Exit(1)
}
