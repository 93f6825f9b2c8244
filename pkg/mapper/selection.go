package mapper

import (
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Mapped reports whether a view object is copied onto the target. Every object of the view
// is, except objects with a controller owner reference: those are made by a controller of the
// source from another object (a ReplicaSet from a Deployment, which also copies the
// Deployment's annotations, including the assignment), and the target's own controllers make
// their own from the mapped owner. Copying them without their owner would leave unowned
// duplicates on the target. Nor is a related copy (IsRelatedCopy): a mapper brought it up from
// a target, and copying it down would send the target's object back as a second one. The
// mapper and `mapper verify` use the same rule.
func Mapped(obj *unstructured.Unstructured) bool {
	if IsRelatedCopy(obj) {
		return false
	}
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller {
			return false
		}
	}
	return true
}

// Reflects reports whether a view object opted in to status reflection (contract.ReflectsStatus).
func Reflects(obj *unstructured.Unstructured) bool {
	return contract.ReflectsStatus(obj.GetAnnotations())
}
