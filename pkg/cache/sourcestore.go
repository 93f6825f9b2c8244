package cache

import (
	"strconv"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// SourceStore returns the store as a complete client-go cache.Store of the source's objects
// (all of them, assigned or not), for code that needs the full interface. Its keys are Keys
// (strings of the form "cluster|namespace/name"); its items are the stored, READ-ONLY
// *unstructured.Unstructured objects. Writes go to the ResourceStore.
//
// ResourceStore itself cannot be a cache.Store: its Get and List are the location queries.
func (s *ResourceStore) SourceStore() toolscache.Store { return sourceStore{s} }

// sourceStore adapts a ResourceStore to cache.Store.
type sourceStore struct{ *ResourceStore }

var _ toolscache.Store = sourceStore{}

// List returns every stored object; one whose content does not decode (Object.Content, a
// defect the cache logs) is left out.
func (s sourceStore) List() []interface{} {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]interface{}, 0, len(s.objects))
	for _, o := range s.objects {
		if u, err := o.Content(); err == nil {
			out = append(out, u)
		}
	}
	return out
}

// ListKeys returns the Keys of every stored object.
func (s sourceStore) ListKeys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.objects))
	for k := range s.objects {
		out = append(out, string(k))
	}
	return out
}

// Get returns the stored version of obj.
func (s sourceStore) Get(obj interface{}) (interface{}, bool, error) {
	v, err := toVersion(obj)
	if err != nil {
		return nil, false, err
	}
	return s.GetByKey(string(s.identify(v).key))
}

// GetByKey returns the stored object with contract.Key key.
func (s sourceStore) GetByKey(key string) (interface{}, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.objects[contract.Key(key)]
	if !ok {
		return nil, false, nil
	}
	u, err := o.Content()
	if err != nil {
		return nil, false, err
	}
	return u, true, nil
}

// Bookmark records a resourceVersion reached by the source (see UpdateResourceVersion).
func (s sourceStore) Bookmark(rv string) { s.UpdateResourceVersion(rv) }

// LastStoreSyncResourceVersion returns the store's ResourceVersion as a string ("" before the
// first sync).
func (s sourceStore) LastStoreSyncResourceVersion() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.synced {
		return ""
	}
	return strconv.FormatUint(s.rv, 10)
}
