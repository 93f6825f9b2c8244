package mapper

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// errConflict marks a sync that found the target place of an object taken by something the
// mapper does not manage. The object is retried with backoff; it is mapped once the place is
// free.
var errConflict = errors.New("conflict with an unmanaged target object")

// reportConflict reports that the target place of key is taken: why says by what. It logs and records a Warning Event on the target namespace when
// the object enters the conflict (not on every retry), counts it in mapper_conflicts_total and
// the mapper_conflicts gauge, makes the source object of view object obj carry the outcome
// record Conflict (recordOutcome), and returns an error wrapping errConflict.
//
// The object is remembered as waiting for the place (places.wait): when the copy in the way is
// deleted and its own source has left the view, the object is retried at once.
func (m *Mapper) reportConflict(ctx context.Context, r *resource, key itemKey, obj *unstructured.Unstructured, place targetPlace, why string) error {
	ns := place.Namespace
	m.places.wait(place, key)
	m.recordOutcome(ctx, r, key, obj, contract.OutcomeConflict, why)
	if prev := m.states.set(key, outcomeConflict); prev != outcomeConflict {
		klog.FromContext(ctx).Info("Not mapping an object: its target place is taken by an object the mapper does not manage",
			"resource", key.GVR.GroupResource().String(), "source", key.source().String(), "targetNamespace", ns, "reason", why)
		if ns != "" {
			ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: ns, Namespace: ns}
			m.recorder.Eventf(ref, nil, corev1.EventTypeWarning, "MappingConflict", "Map",
				"%s %s is not mapped from %s: %s", key.GVR.GroupResource().String(), place.Name, key.source().String(), why)
		}
	}
	return fmt.Errorf("%w: %s", errConflict, why)
}

// placeString returns "namespace/name" of place ("name" when cluster-scoped), for messages.
func placeString(place targetPlace) string {
	if place.Namespace == "" {
		return place.Name
	}
	return place.Namespace + "/" + place.Name
}

// placeFor returns the target place of the copy of key's object of resource r: the namespace
// the namespace mapping gives it, and its name, or both as its ResourceMapping's naming says
// (Naming.Place). Every step that reads, writes or deletes a copy finds it there. It fails
// when the naming cannot be evaluated for the object: then the object has no place, and
// nothing may be written or deleted for it.
func (m *Mapper) placeFor(ctx context.Context, r *resource, key itemKey) (targetPlace, error) {
	ns := ""
	if r.namespaced {
		ns = m.namespaceMapping().TargetNamespace(key.Cluster, key.Namespace)
	}
	ns, name, err := r.projection.Naming.Place(ctx, m.cfg.Location, key.source(), ns)
	if err != nil {
		return targetPlace{}, fmt.Errorf("the naming of ResourceMapping %s cannot place %s: %w", mappingNames([]string{r.projection.Mapping}), key.source().String(), err)
	}
	return targetPlace{GVR: key.GVR, Namespace: ns, Name: name}, nil
}
