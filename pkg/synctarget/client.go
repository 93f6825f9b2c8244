package synctarget

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// Resource is the GroupVersionResource of SyncTargets.
var Resource = controlv1alpha1.SchemeGroupVersion.WithResource("synctargets")

// Client gets SyncTargets and updates their status.
type Client struct {
	resource dynamic.NamespaceableResourceInterface
}

// NewClient returns a Client over d.
func NewClient(d dynamic.Interface) *Client {
	return &Client{resource: d.Resource(Resource)}
}

// GetStatus returns the SyncTarget name as read through its status subresource (the whole
// object; a mapper's RBAC grants only synctargets/status); errors are the API server's (404
// when the location is not registered, or the CRD is not installed).
func (c *Client) GetStatus(ctx context.Context, name string) (*controlv1alpha1.SyncTarget, error) {
	u, err := c.resource.Get(ctx, name, metav1.GetOptions{}, "status")
	if err != nil {
		return nil, err
	}
	return FromUnstructured(u)
}

// GetCachedStatus is GetStatus with resourceVersion "0": the API server answers from its watch
// cache instead of a quorum read of etcd, as the kubelet reads its Node before each status
// update. The answer may be a little behind the latest write; an UpdateStatus from a stale
// copy fails with 409 Conflict.
func (c *Client) GetCachedStatus(ctx context.Context, name string) (*controlv1alpha1.SyncTarget, error) {
	u, err := c.resource.Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"}, "status")
	if err != nil {
		return nil, err
	}
	return FromUnstructured(u)
}

// UpdateStatus writes st's status (PUT of the status subresource, with st's
// resourceVersion, so a concurrent writer makes it fail with 409 Conflict) and returns the
// stored object.
func (c *Client) UpdateStatus(ctx context.Context, st *controlv1alpha1.SyncTarget) (*controlv1alpha1.SyncTarget, error) {
	u, err := ToUnstructured(st)
	if err != nil {
		return nil, err
	}
	out, err := c.resource.UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return FromUnstructured(out)
}

// FromUnstructured converts an unstructured SyncTarget (from a dynamic client or informer)
// to the Go type; it fails when a field has the wrong type.
func FromUnstructured(u *unstructured.Unstructured) (*controlv1alpha1.SyncTarget, error) {
	st := &controlv1alpha1.SyncTarget{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, st); err != nil {
		return nil, fmt.Errorf("decoding SyncTarget %s: %w", u.GetName(), err)
	}
	return st, nil
}

// ToUnstructured converts a SyncTarget to its unstructured form with apiVersion and kind set.
func ToUnstructured(st *controlv1alpha1.SyncTarget) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(controlv1alpha1.SchemeGroupVersion.String())
	u.SetKind("SyncTarget")
	return u, nil
}
