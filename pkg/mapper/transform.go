package mapper

import (
	"strconv"
	"strings"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// droppedAnnotations are annotations that are bookkeeping of the source cluster's own
// controllers and tools, not part of the object's desired state. Copying them would make the
// mapper fight the target's controllers or confuse tools on the target.
var droppedAnnotations = map[string]bool{
	// kubectl's client-side apply record; on the target it would feed kubectl apply's
	// three-way merge with the source's history.
	"kubectl.kubernetes.io/last-applied-configuration": true,
	// The source's deployment controller's revision counter; the target's controller keeps
	// its own.
	"deployment.kubernetes.io/revision": true,
}

// TargetObject describes where and how a source object is copied.
type TargetObject struct {
	// Location is the mapper's location (the value of contract.LocationLabel).
	Location string
	// Namespace is the target namespace ("" for cluster-scoped objects).
	Namespace string
	// Name is the copy's name (a ResourceMapping's naming, Naming.Place); "" keeps the source
	// object's.
	Name string
	// Source names the source object.
	Source SourceRef
	// Kind, when not zero, is the copy's apiVersion and kind (a ResourceMapping's projection,
	// Projection.TargetKind); the zero value keeps the object's own.
	Kind schema.GroupVersionKind
}

// Transform returns the apply configuration of source object obj (as read from the location
// view) for the target cluster. obj is not changed.
//
// The result has apiVersion, kind (target.Kind when set: a ResourceMapping's projection), and metadata with only name, namespace (target.Namespace),
// labels and annotations, plus every other top-level field of obj except status. Everything
// the source server populated or that only makes sense on the source is gone: uid,
// resourceVersion, generation, creationTimestamp, deletion fields, managedFields,
// ownerReferences (the owners do not exist on the target), finalizers (the source's
// controllers would never remove them on the target), generateName, status, labels and
// annotations with a kcp.io or status.kcp.io prefix, and droppedAnnotations. Kind-specific
// rules (kindRules) then remove fields a real apply onto another cluster rejects or that the
// source cluster allocated. Finally contract.LocationLabel=target.Location and the Source*Annotation
// annotations are set (contract.SourceGenerationAnnotation only when obj has a
// metadata.generation).
func Transform(obj *unstructured.Unstructured, target TargetObject) *unstructured.Unstructured {
	out := map[string]interface{}{}
	for k, v := range obj.Object {
		if k == "metadata" || k == "status" {
			continue
		}
		out[k] = runtime.DeepCopyJSONValue(v)
	}
	u := &unstructured.Unstructured{Object: out}
	if !target.Kind.Empty() {
		u.SetGroupVersionKind(target.Kind)
	}
	if target.Name != "" {
		u.SetName(target.Name)
	} else {
		u.SetName(obj.GetName())
	}
	if target.Namespace != "" {
		u.SetNamespace(target.Namespace)
	}

	labels := map[string]string{}
	for k, v := range obj.GetLabels() {
		if !reserved(k) {
			labels[k] = v
		}
	}
	annotations := map[string]string{}
	for k, v := range obj.GetAnnotations() {
		if !reserved(k) && !droppedAnnotations[k] {
			annotations[k] = v
		}
	}
	if rule := kindRules[obj.GroupVersionKind().GroupKind()]; rule != nil {
		rule(u.Object, objectMeta{Labels: labels, Annotations: annotations})
	}

	labels[contract.LocationLabel] = target.Location
	annotations[contract.SourceClusterAnnotation] = target.Source.Cluster
	if target.Source.Namespace != "" {
		annotations[contract.SourceNamespaceAnnotation] = target.Source.Namespace
	}
	annotations[contract.SourceNameAnnotation] = target.Source.Name
	if uid := obj.GetUID(); uid != "" {
		annotations[contract.SourceUIDAnnotation] = string(uid)
	}
	if g := obj.GetGeneration(); g > 0 {
		annotations[contract.SourceGenerationAnnotation] = strconv.FormatInt(g, 10)
	}
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	return u
}

// reserved reports whether a label or annotation key has one of the reservedPrefixes.
func reserved(key string) bool {
	i := strings.IndexByte(key, '/')
	if i < 0 {
		return false
	}
	prefix := key[:i]
	for _, p := range reservedPrefixes {
		if prefix == p {
			return true
		}
	}
	return false
}

// objectMeta holds the labels and annotations of the object Transform builds, before the
// mapper's own marking is added.
type objectMeta struct {
	Labels, Annotations map[string]string
}

// kindRules are the kind-specific parts of Transform. Each gets the object being built (whose
// metadata has only name and namespace) and its labels and annotations, and removes what
// another cluster rejects or must allocate itself. Where each rule comes from is in its doc
// comment and in test/e2e/mapper_transform_test.go, which applies real source objects onto a
// real target.
var kindRules = map[schema.GroupKind]func(obj map[string]interface{}, meta objectMeta){
	{Kind: "Service"}:               transformService,
	{Group: "batch", Kind: "Job"}:   transformJob,
	{Kind: "PersistentVolumeClaim"}: transformPersistentVolumeClaim,
	{Kind: "Pod"}:                   transformPod,
}

// transformService removes what the source cluster allocated for a Service: spec.clusterIP and
// spec.clusterIPs (unless "None", a headless Service, which is part of the desired state),
// spec.ports[*].nodePort and spec.healthCheckNodePort (node ports are per cluster; a fixed one
// may be taken or outside the target's range), and spec.ipFamilies when the family policy is
// SingleStack (the default, filled from the source's allocation; the target picks its own).
func transformService(obj map[string]interface{}, _ objectMeta) {
	spec, _ := obj["spec"].(map[string]interface{})
	if spec == nil {
		return
	}
	if ip, _ := spec["clusterIP"].(string); ip != "None" {
		delete(spec, "clusterIP")
		delete(spec, "clusterIPs")
	}
	delete(spec, "healthCheckNodePort")
	if policy, _ := spec["ipFamilyPolicy"].(string); policy == "" || policy == "SingleStack" {
		delete(spec, "ipFamilies")
		delete(spec, "ipFamilyPolicy")
	}
	ports, _ := spec["ports"].([]interface{})
	for _, p := range ports {
		if port, ok := p.(map[string]interface{}); ok {
			delete(port, "nodePort")
		}
	}
}

// jobControllerUIDLabels are the labels the job controller's defaulting puts on a Job's
// generated selector and pod template; their value is the source Job's uid.
var jobControllerUIDLabels = []string{"controller-uid", "batch.kubernetes.io/controller-uid"}

// transformJob removes a generated selector: unless spec.manualSelector is true, the API
// server generates spec.selector from the Job's uid and rejects a given one ("`selector` not
// auto-generated"), and the pod template's controller-uid labels name the source Job's uid.
func transformJob(obj map[string]interface{}, meta objectMeta) {
	spec, _ := obj["spec"].(map[string]interface{})
	if spec == nil {
		return
	}
	if manual, _ := spec["manualSelector"].(bool); manual {
		return
	}
	delete(spec, "selector")
	for _, l := range jobControllerUIDLabels {
		delete(meta.Labels, l)
	}
	template, _ := spec["template"].(map[string]interface{})
	templateMeta, _ := template["metadata"].(map[string]interface{})
	tl, _ := templateMeta["labels"].(map[string]interface{})
	for _, l := range jobControllerUIDLabels {
		delete(tl, l)
	}
}

// pvcBindingAnnotations are written by the source's PV controller and scheduler when a claim
// is bound or a volume is provisioned; they describe the source's volumes.
var pvcBindingAnnotations = []string{
	"pv.kubernetes.io/bind-completed",
	"pv.kubernetes.io/bound-by-controller",
	"volume.beta.kubernetes.io/storage-provisioner",
	"volume.kubernetes.io/storage-provisioner",
	"volume.kubernetes.io/selected-node",
}

// transformPersistentVolumeClaim drops the binding to a source PersistentVolume
// (spec.volumeName, which names a volume of the source cluster) and the binding annotations,
// so that the target binds or provisions its own volume.
func transformPersistentVolumeClaim(obj map[string]interface{}, meta objectMeta) {
	if spec, _ := obj["spec"].(map[string]interface{}); spec != nil {
		delete(spec, "volumeName")
	}
	for _, a := range pvcBindingAnnotations {
		delete(meta.Annotations, a)
	}
}

// transformPod drops spec.nodeName: it names a node of the source cluster.
func transformPod(obj map[string]interface{}, _ objectMeta) {
	if spec, _ := obj["spec"].(map[string]interface{}); spec != nil {
		delete(spec, "nodeName")
	}
}
