package apiserver

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/registry/view"
)

// viewObjects hands the cache to the views (view.Objects): each mirrored resource's
// *cache.ResourceStore as a view.Store.
type viewObjects struct{ *cache.Cache }

// Store returns the store of a mirrored resource; false (and a nil Store) when it is not
// mirrored.
func (o viewObjects) Store(gvr schema.GroupVersionResource) (view.Store, bool) {
	s, ok := o.Cache.Store(gvr)
	if !ok {
		return nil, false
	}
	return s, true
}
