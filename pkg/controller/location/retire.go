package location

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// A location whose SyncTarget is deleted is retired (docs/mapper.md, "Deletion"): it will never
// delete its copies, so its finalizer, locations.mapper.kcp.io/<location>, must not hold any
// source object. retire removes that finalizer from every object of the source that carries
// it, in every resource the source serves with list and patch. It runs when the controller
// sees a SyncTarget deleted (an informer deletion event); a SyncTarget deleted while
// mapper-controller was not running leaves the finalizers to an administrator
// (docs/mapper.md says how). The location's copies stay on its target.

// retireKeyPrefix marks the queue items of retirements (the other items are SyncTarget names,
// which cannot contain a colon).
const retireKeyPrefix = "retire:"

// targetDeleted queues the retirement of the location whose SyncTarget was deleted.
func (c *Controller) targetDeleted(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if c.cfg.Metadata == nil || c.cfg.Discovery == nil {
		return
	}
	if m, ok := obj.(metav1.Object); ok {
		c.queue.Add(retireKeyPrefix + m.GetName())
	}
}

// retire removes location's finalizer from every source object carrying it (see above), unless
// the location has a SyncTarget again (registered anew meanwhile: its mapper may be back).
// It returns the first error after trying every resource, so that the retirement is retried.
func (c *Controller) retire(ctx context.Context, location string) error {
	if _, exists, err := c.targets.GetStore().GetByKey(location); err != nil || exists {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("location", location)
	resources, err := patchableResources(c.cfg.Discovery)
	if err != nil && len(resources) == 0 {
		return fmt.Errorf("discovering the source's resources: %w", err)
	}
	own := contract.LocationFinalizer(location)
	released := 0
	var firstErr error
	for _, gvr := range resources {
		n, err := releaseFinalizers(ctx, c.cfg.Metadata, gvr, own)
		released += n
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("releasing %s from %s: %w", own, gvr.GroupResource(), err)
		}
	}
	if released > 0 || firstErr == nil {
		logger.Info("Released a retired location's finalizers (its SyncTarget was deleted)", "objects", released)
	}
	return firstErr
}

// patchableResources returns the resources the source serves with list and patch (preferred
// versions; a partial discovery failure returns what was found, with the error).
func patchableResources(d discovery.DiscoveryInterface) ([]schema.GroupVersionResource, error) {
	lists, err := d.ServerPreferredResources()
	var out []schema.GroupVersionResource
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range l.APIResources {
			if hasVerbs(r.Verbs, "list", "patch") {
				out = append(out, gv.WithResource(r.Name))
			}
		}
	}
	return out, err
}

// hasVerbs reports whether verbs holds each of want.
func hasVerbs(verbs metav1.Verbs, want ...string) bool {
	for _, w := range want {
		found := false
		for _, v := range verbs {
			found = found || v == w
		}
		if !found {
			return false
		}
	}
	return true
}

// releaseFinalizers removes finalizer from every object of gvr that carries it, listing the
// objects' metadata page by page. Each removal is a JSON patch that tests the finalizer at its
// index first (a precondition: a concurrent change of the list fails the test, 422, and is
// retried with the next retirement attempt) and removes nothing else. It returns how many
// objects it released.
func releaseFinalizers(ctx context.Context, client metadata.Interface, gvr schema.GroupVersionResource, finalizer string) (int, error) {
	res := client.Resource(gvr)
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return res.List(ctx, opts)
	})
	released := 0
	var firstErr error
	err := p.EachListItemWithAlloc(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return nil
		}
		for i, f := range m.Finalizers {
			if f != finalizer {
				continue
			}
			path := "/metadata/finalizers/" + strconv.Itoa(i)
			patch, _ := json.Marshal([]map[string]interface{}{
				{"op": "test", "path": path, "value": finalizer},
				{"op": "remove", "path": path},
			})
			_, err := res.Namespace(m.Namespace).Patch(ctx, m.Name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: "mapper-controller"})
			switch {
			case err == nil:
				released++
			case apierrors.IsNotFound(err):
			default:
				if firstErr == nil {
					firstErr = err
				}
			}
			break
		}
		return nil
	})
	if err != nil {
		return released, err
	}
	return released, firstErr
}
