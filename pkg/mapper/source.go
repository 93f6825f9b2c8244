package mapper

import (
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// SourceRef identifies a source object: its logical cluster, namespace ("" for cluster-scoped
// resources) and name. Target copies carry it in the Source*Annotation annotations.
type SourceRef struct {
	Cluster   string
	Namespace string
	Name      string
}

// String returns "cluster|namespace/name" ("cluster|name" when cluster-scoped), the form
// mapper-apiserver uses for its cache keys, for logs and verify reports.
func (r SourceRef) String() string {
	return string(contract.NewKey(r.Cluster, r.Namespace, r.Name))
}

// SourceOf returns the SourceRef of obj, an object read from a location view. Its cluster is
// the contract.ClusterAnnotation, else defaultCluster (a plain Kubernetes source is one logical cluster).
func SourceOf(obj *unstructured.Unstructured, defaultCluster string) SourceRef {
	cluster := obj.GetAnnotations()[contract.ClusterAnnotation]
	if cluster == "" {
		cluster = defaultCluster
	}
	return SourceRef{Cluster: cluster, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// MarkedSource reads the source a target object names in its Source*Annotation annotations.
// ok is false when the object lacks contract.LocationLabel=location or any of the cluster and name
// annotations (and the namespace annotation for namespaced objects): such an object is not
// the mapper's, and the mapper never changes or deletes it. uid is the contract.SourceUIDAnnotation
// ("" if absent; it is informational, a re-created source keeps its target copy).
func MarkedSource(obj metaObject, location string, namespaced bool) (ref SourceRef, uid types.UID, ok bool) {
	if obj.GetLabels()[contract.LocationLabel] != location {
		return SourceRef{}, "", false
	}
	ann := obj.GetAnnotations()
	ref = SourceRef{Cluster: ann[contract.SourceClusterAnnotation], Namespace: ann[contract.SourceNamespaceAnnotation], Name: ann[contract.SourceNameAnnotation]}
	if ref.Cluster == "" || ref.Name == "" || (namespaced && ref.Namespace == "") {
		return SourceRef{}, "", false
	}
	return ref, types.UID(ann[contract.SourceUIDAnnotation]), true
}

// metaObject is the part of metav1.Object that MarkedSource reads, satisfied by
// *unstructured.Unstructured and *metav1.PartialObjectMetadata.
type metaObject interface {
	GetLabels() map[string]string
	GetAnnotations() map[string]string
}

// listOptionsForLocation is the label selector of the managed target objects of location.
func listOptionsForLocation(location string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: contract.LocationLabel + "=" + location}
}
