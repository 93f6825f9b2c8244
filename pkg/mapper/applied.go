package mapper

import (
	"encoding/json"
	"hash/fnv"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// appliedCopies remembers, per view object, what the mapper's last successful server-side
// apply sent and the resourceVersion of the target copy it answered with, so that a sync that
// would send the same apply configuration onto a copy nobody changed since does not send it
// (unchangedSince). Most such syncs follow a change of the view object that the copy does not
// show: the location's own finalizer added through the view (deletion.go) makes a new
// resourceVersion of every object right after its first copy. Such an apply is a no-op on the
// target, but it costs the target a request and an apply. It is safe for concurrent use.
type appliedCopies struct {
	mu sync.Mutex
	m  map[itemKey]appliedCopy
}

// appliedCopy is what one apply sent (a hash of its configuration) and the copy's
// resourceVersion it answered with.
type appliedCopy struct {
	config          uint64
	resourceVersion string
}

func newAppliedCopies() *appliedCopies {
	return &appliedCopies{m: map[itemKey]appliedCopy{}}
}

// configHash returns a hash of the apply configuration desired (its JSON encoding, whose
// object members encoding/json sorts), and false when it cannot be encoded.
func configHash(desired *unstructured.Unstructured) (uint64, bool) {
	raw, err := json.Marshal(desired.Object)
	if err != nil {
		return 0, false
	}
	h := fnv.New64a()
	_, _ = h.Write(raw)
	return h.Sum64(), true
}

// unchangedSince reports whether applying config (configHash) to live, key's target copy as
// last read, would repeat the last apply of key onto a copy nothing changed since: the same
// configuration, and live still at the resourceVersion that apply answered with. A copy
// someone else changed, deleted or re-created has another resourceVersion (or is nil) and is
// applied again.
func (a *appliedCopies) unchangedSince(key itemKey, config uint64, live *unstructured.Unstructured) bool {
	if live == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	last, ok := a.m[key]
	return ok && last.config == config && last.resourceVersion == live.GetResourceVersion()
}

// record notes that config was applied to key's copy, which the target answered at
// resourceVersion.
func (a *appliedCopies) record(key itemKey, config uint64, resourceVersion string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.m[key] = appliedCopy{config: config, resourceVersion: resourceVersion}
}

// forget drops what is known of key's last apply: its copy was deleted, the apply failed, or
// the object left the view.
func (a *appliedCopies) forget(key itemKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, key)
}
