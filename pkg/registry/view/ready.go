package view

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// waitSynced is the one gate between a view request and the stores it reads: every get, list,
// watch and status write of a resource waits for that resource's first sync from the source
// (cache.ResourceStore.WaitUntilSynced, up to the freshness timeout, then 429 or 503 with
// Retry-After, as kube-apiserver's cacher before it is ready), so an unsynced resource is
// never served as empty. The view's namespaces are made from every namespaced resource, so
// they wait for all of them (within one shared timeout).
func (v *Views) waitSynced(ctx context.Context, gvr schema.GroupVersionResource) error {
	if gvr != namespacesGVR {
		store, ok := v.objects.Store(gvr)
		if !ok {
			return nil // handlers answered 404 already; a store closed meanwhile answers 503 itself
		}
		return store.WaitUntilSynced(ctx, v.opts.FreshnessTimeout)
	}
	deadline := time.Now().Add(v.opts.FreshnessTimeout)
	for _, r := range v.objects.Resources() {
		if !r.Namespaced {
			continue
		}
		store, ok := v.objects.Store(r.GVR)
		if !ok {
			continue
		}
		if err := store.WaitUntilSynced(ctx, max(time.Until(deadline), 0)); err != nil {
			return err
		}
	}
	return nil
}
