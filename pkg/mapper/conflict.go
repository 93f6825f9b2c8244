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

// reportConflict reports that the target place of key (namespace ns, the object's name) is
// taken: why says by what. It logs and records a Warning Event on the target namespace when
// the object enters the conflict (not on every retry), counts it in mapper_conflicts_total and
// the mapper_conflicts gauge, makes the source object of view object obj carry the outcome
// record Conflict (recordOutcome), and returns an error wrapping errConflict.
//
// The object is remembered as waiting for the place (places.wait): when the copy in the way is
// deleted and its own source has left the view, the object is retried at once.
func (m *Mapper) reportConflict(ctx context.Context, r *resource, key itemKey, obj *unstructured.Unstructured, ns, why string) error {
	m.places.wait(placeOf(key, ns), key)
	m.recordOutcome(ctx, r, key, obj, contract.OutcomeConflict, why)
	if prev := m.states.set(key, outcomeConflict); prev != outcomeConflict {
		klog.FromContext(ctx).Info("Not mapping an object: its target place is taken by an object the mapper does not manage",
			"resource", key.GVR.GroupResource().String(), "source", key.source().String(), "targetNamespace", ns, "reason", why)
		if ns != "" {
			ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: ns, Namespace: ns}
			m.recorder.Eventf(ref, nil, corev1.EventTypeWarning, "MappingConflict", "Map",
				"%s %s is not mapped from %s: %s", key.GVR.GroupResource().String(), key.Name, key.source().String(), why)
		}
	}
	return fmt.Errorf("%w: %s", errConflict, why)
}

// placeOf returns the target place of key's object in target namespace ns.
func placeOf(key itemKey, ns string) targetPlace {
	return targetPlace{GVR: key.GVR, Namespace: ns, Name: key.Name}
}
