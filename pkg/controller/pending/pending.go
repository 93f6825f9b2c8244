// Package pending remembers the writes of a controller that its informers have not delivered
// back yet: a round that reads an informer between a write and the watch event of that write
// sees the object as it was before, decides the same write again, and either repeats it (one
// more request to the source for nothing) or fails on its resourceVersion precondition. This
// is kube-controller-manager's expectations pattern (pkg/controller's ControllerExpectations),
// by object version instead of by count.
package pending

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Writes are the writes not yet seen, by object uid. Safe for concurrent use.
type Writes struct {
	mu sync.Mutex
	// from are the resourceVersions the writes were made from.
	from map[types.UID]string
}

// New returns an empty Writes.
func New() *Writes { return &Writes{from: map[types.UID]string{}} }

// Wrote records that obj, as the informer held it, was written, and that the write made the
// object's version after (the write's answer). A write that changed nothing (after equals
// obj's resourceVersion) is not recorded: no event will follow it.
func (w *Writes) Wrote(obj metav1.Object, after string) {
	if after == "" || after == obj.GetResourceVersion() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.from[obj.GetUID()] = obj.GetResourceVersion()
}

// Stale reports whether obj, as the informer holds it now, is the version a recorded write
// was made from: the informer has not delivered the write yet. Any other version forgets the
// write (the informer moved on).
func (w *Writes) Stale(obj metav1.Object) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	from, ok := w.from[obj.GetUID()]
	if !ok {
		return false
	}
	if from == obj.GetResourceVersion() {
		return true
	}
	delete(w.from, obj.GetUID())
	return false
}

// Forget forgets the write of the object uid (it was deleted).
func (w *Writes) Forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.from, uid)
}

// Len returns the number of writes not yet seen.
func (w *Writes) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.from)
}
