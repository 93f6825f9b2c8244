package mirror

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// keptAnnotations are the annotations of the contract that mapper-controller's readers of the
// mirror read; trim drops every other one.
var keptAnnotations = map[string]bool{
	contract.AssignedLocationsAnnotation: true,
	contract.ClusterAnnotation:           true,
	contract.StatusPolicyAnnotation:      true,
	contract.StatusLocationAnnotation:    true,
}

// trim is the informers' transform: a *metav1.PartialObjectMetadata reduced to its type, name,
// namespace, uid, resourceVersion, generation, labels and the annotations of the contract
// (keptAnnotations, every status.kcp.io/<location> and every outcome.kcp.io/<location>: the
// status record controller removes those of locations an object left). managedFields, owner references,
// finalizers and other annotations (kubectl's last-applied-configuration can be as large as the
// object) are not kept. Anything else is returned as it is.
func trim(obj interface{}) (interface{}, error) {
	o, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	var ann map[string]string
	for k, v := range o.Annotations {
		if keptAnnotations[k] || strings.HasPrefix(k, contract.StatusRecordAnnotationPrefix) || strings.HasPrefix(k, contract.OutcomeAnnotationPrefix) {
			if ann == nil {
				ann = map[string]string{}
			}
			ann[k] = v
		}
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta: o.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: o.Name, Namespace: o.Namespace, UID: o.UID, ResourceVersion: o.ResourceVersion,
			Generation: o.Generation, Labels: o.Labels, Annotations: ann,
		},
	}, nil
}
