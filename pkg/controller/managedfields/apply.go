package managedfields

import (
	"context"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
)

// Apply says how ApplyAnnotations applies.
type Apply struct {
	// Manager is the field manager.
	Manager string
	// Force takes over the fields other managers own with other values instead of failing
	// with 409 Conflict.
	Force bool
	// Precondition, when true, sends obj's resourceVersion: kube-apiserver refuses the apply
	// with 409 Conflict when the object changed since, as for an update.
	Precondition bool
}

// ApplyAnnotations writes annotations on obj, of resource gvr and kind gvk, with server-side
// apply: the annotations a.Manager owned and annotations leaves out are removed unless another
// manager owns them too (nil or empty: all of them), and without a.Force a field another
// manager owns with another value makes it fail with 409 Conflict, which leaves the object
// unchanged. It applies through the metadata client, so kube-apiserver answers with the
// object's metadata (`as=PartialObjectMetadata`, protobuf where the resource has it) instead of
// the whole object, which nothing reads. It returns the resourceVersion of the object after the
// apply, and kube-apiserver's error.
//
// A server-side apply always records its field manager in metadata.managedFields, also on an
// object that has none (kube-apiserver then records the fields it had under
// "before-first-apply"); an update does not start recording on such an object. That is why
// the controllers that need to know later what they wrote (OwnedAnnotations) apply.
func ApplyAnnotations(ctx context.Context, client metadata.Interface, gvr schema.GroupVersionResource, gvk schema.GroupVersionKind, obj metav1.Object, annotations map[string]string, a Apply) (string, error) {
	meta := map[string]interface{}{"name": obj.GetName()}
	if obj.GetNamespace() != "" {
		meta["namespace"] = obj.GetNamespace()
	}
	if a.Precondition {
		meta["resourceVersion"] = obj.GetResourceVersion()
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	body, err := json.Marshal(map[string]interface{}{"apiVersion": apiVersion, "kind": kind, "metadata": meta})
	if err != nil {
		return "", err
	}
	out, err := client.Resource(gvr).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: a.Manager, Force: &a.Force})
	if err != nil {
		return "", err
	}
	return out.GetResourceVersion(), nil
}
