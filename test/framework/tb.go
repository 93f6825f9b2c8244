package framework

// TB is the part of TB the framework uses. *testing.T and *testing.B satisfy it, and so
// can a program that starts a control plane outside a test (hack/demo): Fatal and Fatalf must
// not return, Cleanup functions run when the program stops, last added first.
type TB interface {
	Helper()
	Cleanup(func())
	Error(args ...any)
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Failed() bool
	Logf(format string, args ...any)
	Skip(args ...any)
	TempDir() string
}
