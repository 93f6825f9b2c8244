package dependencies

import (
	"context"
	"encoding/json"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// write is one patch a round decided on (decide), with its result.
type write struct {
	gvr schema.GroupVersionResource
	obj metav1.Object
	// assigned is the new kcp.io/assigned-locations (sorted; empty removes it), added the new
	// record (sorted; empty removes it).
	assigned, added []string
	// removes is whether a location leaves the assignment.
	removes bool
	// err is the patch's error, set by the round.
	err error
}

// compareWrites orders writes by resource and name (the order of the log).
func compareWrites(a, b *write) int {
	if c := strings.Compare(a.gvr.GroupResource().String(), b.gvr.GroupResource().String()); c != 0 {
		return c
	}
	return strings.Compare(a.obj.GetName(), b.obj.GetName())
}

// patchBody returns w's JSON merge patch: kcp.io/assigned-locations and the record (null
// removes them), with the object's resourceVersion as precondition, so that an object someone
// changed since the informer's copy fails with 409 Conflict and is decided again from the
// newer copy instead of losing that change.
func patchBody(w *write) ([]byte, error) {
	value := func(locs []string) interface{} {
		if len(locs) == 0 {
			return nil
		}
		b, _ := json.Marshal(locs) // strings: cannot fail
		return string(b)
	}
	return json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{
		"resourceVersion": w.obj.GetResourceVersion(),
		"annotations": map[string]interface{}{
			contract.AssignedLocationsAnnotation: value(w.assigned),
			LocationsAnnotation:                  value(w.added),
		},
	}})
}

// patch writes w with a JSON merge patch through the metadata client (the answer is the
// object's metadata), as FieldManager: kube-apiserver records both annotations as this field
// manager's (an update), which is how the next round knows the record is its own.
func (c *Controller) patch(ctx context.Context, w *write) error {
	body, err := patchBody(w)
	if err != nil {
		return err
	}
	_, err = c.metadata.Resource(w.gvr).Namespace(w.obj.GetNamespace()).Patch(ctx, w.obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
	kind := "Assign"
	if w.removes {
		kind = "Unassign"
	}
	objectWrites.WithLabelValues(kind, result(err, apierrors.IsConflict(err))).Inc()
	return err
}
