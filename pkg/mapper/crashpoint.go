package mapper

import (
	"os"
	"syscall"
)

// Fault injection for the kill -9 tests of the deletion protocol (test/e2e,
// TestDeletionCrashPoints; docs/mapper.md, "Deletion"). It is a test-only hook: with the
// environment variable CrashPointEnv set to one of the crash points below, the mapper sends
// itself SIGKILL when it reaches that point, exactly as `kill -9` would at that moment (no
// deferred cleanup, no Lease released). Unset (always in production), it costs one string
// comparison per crash point reached.
const CrashPointEnv = "CLUSTER_MAPPER_TEST_CRASH_AT"

// Crash points of CrashPointEnv.
const (
	// CrashAfterFinalizerAdded: the location's finalizer was just added to the source object;
	// no copy has been created yet.
	CrashAfterFinalizerAdded = "after-finalizer-added"
	// CrashAfterCopyDeleted: the copy of an object being deleted is gone from the target; the
	// location's finalizer is still on the source object.
	CrashAfterCopyDeleted = "after-copy-deleted"
)

// crashPoint is CrashPointEnv's value, read once at start.
var crashPoint = os.Getenv(CrashPointEnv)

// crashAt kills the process with SIGKILL when point is the configured crash point.
func crashAt(point string) {
	if crashPoint != "" && crashPoint == point {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is delivered; nothing after this point runs
	}
}
