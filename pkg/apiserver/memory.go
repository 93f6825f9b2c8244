package apiserver

import (
	"runtime/debug"

	"k8s.io/klog/v2"
)

// releaseStartupMemory returns the memory the first sync of the source cache freed to the
// operating system; the server calls it once, when the cache first synced.
//
// The first list of each resource is the process's peak: client-go's reflector hands the store
// every object of the list at once (Replace), so the list's garbage (its response body, the
// list items) is freed only after the sync. Go's background scavenger returns such memory only
// slowly and only down to the next heap goal (twice the live heap with GOGC=100), so the
// process would keep its start-up peak resident for minutes. One debug.FreeOSMemory (a garbage
// collection, then every free page returned) makes the resident size after start-up that of the
// cache, at the cost of one collection.
func releaseStartupMemory() {
	debug.FreeOSMemory()
	klog.V(2).InfoS("Returned the memory of the first sync to the operating system")
}
