package mapper

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// errIdentity marks a sync refused because the view object's identity is not its source's.
// The object is retried with backoff (the view may correct itself); nothing is applied.
var errIdentity = errors.New("the view object's identity is not its source's")

// confirmIdentity is the mapper's second line of defence behind mapper-apiserver's rule that
// no rendering changes an object's identity (pkg/rendercheck, docs/customization.md): before
// it applies view object obj (of key, the source it names: its kcp.io/cluster, namespace and
// name) onto a target place whose managed copy is live (nil: none), it makes sure obj is the
// source object it claims to be. A view object whose rendering changed its name, namespace or
// cluster would otherwise create or overwrite the copy of another source object, maybe
// another tenant's.
//
//   - obj must have a uid (every source object has one, and the view never removes it), and
//     a namespace when its resource is namespaced;
//   - when live names the same source with the same uid (kcp.io/source-uid), obj is the object
//     the copy was made from: confirmed, without a request (the steady state);
//   - otherwise (a first copy, a re-created source object, or a copy of another object under
//     this identity), the view is asked for the object at key (a GET on its per-cluster path,
//     not older than obj's resourceVersion, answered from mapper-apiserver's cache) and obj is
//     confirmed only if that is obj (the same uid).
//
// A refusal (errIdentity) is logged when the object enters it, counted in
// mapper_identity_refusals_total, and retried with backoff; a failed GET is returned as an
// error (retried, not counted). The place is not taken and nothing is written.
func (m *Mapper) confirmIdentity(ctx context.Context, r *resource, key itemKey, obj, live *unstructured.Unstructured) error {
	uid := obj.GetUID()
	switch {
	case uid == "":
		return m.refuseIdentity(ctx, r, key, "the view object has no metadata.uid; a source object always has one")
	case r.namespaced && key.Namespace == "":
		return m.refuseIdentity(ctx, r, key, "the view object of a namespaced resource has no namespace")
	}
	if live != nil {
		if _, liveUID, ok := MarkedSource(live, m.cfg.Location, r.namespaced); ok && liveUID == uid {
			return nil
		}
	}
	view, err := m.clusterViews.For(key.Cluster)
	if err != nil {
		return m.refuseIdentity(ctx, r, key, err.Error())
	}
	got, err := view.Resource(r.gvr).Namespace(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{ResourceVersion: obj.GetResourceVersion()})
	switch {
	case apierrors.IsNotFound(err):
		return m.refuseIdentity(ctx, r, key, "the view holds no object at "+key.source().String()+" (or it was deleted since)")
	case err != nil:
		m.metrics.errors(r.name(), "apply").Inc()
		return fmt.Errorf("confirming the identity of %s %s through the view: %w", r.name(), key.source().String(), err)
	case got.GetUID() != uid:
		return m.refuseIdentity(ctx, r, key, fmt.Sprintf("the view's object at %s has uid %q, this one %q: a rendering gave it another object's identity",
			key.source().String(), got.GetUID(), uid))
	}
	return nil
}

// refuseIdentity counts and (when the object enters the refusal) logs a refusal of key's
// object for why, and returns an error wrapping errIdentity.
func (m *Mapper) refuseIdentity(ctx context.Context, r *resource, key itemKey, why string) error {
	m.metrics.identityRefusals(r.name()).Inc()
	if prev := m.states.set(key, outcomeRefused); prev != outcomeRefused {
		klog.FromContext(ctx).Info("Not mapping a view object: its identity is not its source's (docs/customization.md, \"What a rendering may not change\")",
			"resource", r.name(), "source", contract.Truncate(key.source().String(), 512), "reason", contract.Truncate(why, 512))
	}
	return fmt.Errorf("%w: %s", errIdentity, why)
}
