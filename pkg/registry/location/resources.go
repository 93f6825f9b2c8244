package location

import (
	"sort"

	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper"
	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// maxUnsyncedMessage caps the error message of an unsynced resource, in bytes.
const maxUnsyncedMessage = 512

// ResourceHealth gives the mirrored resources the server cannot list from the source (such
// a resource is reported, here on every Location's status, and blocks nothing
// else).
type ResourceHealth interface {
	// UnsyncedResources returns them sorted by group, then resource.
	UnsyncedResources() []mapper.UnsyncedResource
}

// CacheResourceHealth is the ResourceHealth of a source cache: every mirrored resource whose
// last attempt to list the source failed (ResourceStore.SyncError), with the reason the cache
// also counts in mapper_apiserver_source_list_errors_total (cache.SyncErrorReason).
type CacheResourceHealth struct {
	// Cache is the source cache.
	Cache *cache.Cache
}

// UnsyncedResources implements ResourceHealth.
func (h CacheResourceHealth) UnsyncedResources() []mapper.UnsyncedResource {
	var out []mapper.UnsyncedResource
	for _, info := range h.Cache.Resources() {
		store, ok := h.Cache.Store(info.GVR)
		if !ok {
			continue
		}
		err := store.SyncError()
		if err == nil {
			continue
		}
		out = append(out, mapper.UnsyncedResource{
			Group:    info.GVR.Group,
			Resource: info.GVR.Resource,
			Reason:   cache.SyncErrorReason(err),
			Message:  contract.Truncate(err.Error(), maxUnsyncedMessage),
		})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Group < b.Group || (a.Group == b.Group && a.Resource < b.Resource)
	})
	return out
}
