/*
Copyright The cluster-mapper Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResourceMapping says how the mappers map one source resource (docs/resourcemapping.md).
// It reaches the mappers like every object: assigned to locations, each mapper reads the
// ResourceMappings of its location from its view. This version projects: the objects of
// spec.source are written onto the target as spec.target (apiVersion and kind rewritten,
// every other field copied as it is), and their status comes back the same way.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=cluster-mapper
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=".spec.source.resource"
// +kubebuilder:printcolumn:name="Source-Group",type=string,JSONPath=".spec.source.group"
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=".spec.target.resource"
// +kubebuilder:printcolumn:name="Target-Group",type=string,JSONPath=".spec.target.group"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type ResourceMapping struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the source resource and how its objects are mapped.
	Spec ResourceMappingSpec `json:"spec"`
	// status is what the mappers of the mapping's locations found (through their views: one
	// record per location, docs/status.md).
	// +optional
	Status ResourceMappingStatus `json:"status,omitempty"`
}

// ResourceMappingSpec names a source resource and the target resource its objects are
// written as.
//
// +kubebuilder:validation:XValidation:rule="!has(self.target) || self.target.group != self.source.group || self.target.resource != self.source.resource || self.target.version != self.source.version",message="spec.target names spec.source itself; leave it out for an identity mapping"
type ResourceMappingSpec struct {
	// source is the resource of the source objects (as the location view serves it).
	// +kubebuilder:validation:XValidation:rule="self.group != 'control.mapper.kcp.io' && self.group != 'mapper.kcp.io'",message="the resources of cluster-mapper's own groups cannot be mapped"
	Source GroupVersionResource `json:"source"`
	// target is the resource the objects are written as on the target cluster; without it
	// they are written under their own resource. kind must be the kind the target serves
	// resource as (the target refuses the copies otherwise, and says so in their outcome records).
	// +optional
	Target *ResourceMappingTarget `json:"target,omitempty"`
	// naming gives the copies' target namespace and name by CEL expressions; without it the
	// copies keep their source name and the mapper's --namespace-mapping decides their
	// namespace.
	// +optional
	Naming *ResourceMappingNaming `json:"naming,omitempty"`
	// related lists the objects that belong with each object of the source resource: objects
	// of the source that follow it to its locations (origin Source), and objects that the
	// target creates for its copy, copied up into the source (origin Target).
	// +optional
	// +listType=map
	// +listMapKey=identifier
	// +kubebuilder:validation:MaxItems=16
	Related []RelatedResource `json:"related,omitempty"`
}

// ResourceMappingNaming gives the target namespace and name of each copy as CEL expressions.
// Each is evaluated per source object with the variables `location` (a string, the mapper's
// location) and `source` (a map of strings: `source.cluster`, `source.namespace` and
// `source.name`, the object's logical cluster, namespace and name), and must return a string. A result that is not a valid name is made one: cut
// and suffixed with a hash of the whole result, within 63 characters (docs/resourcemapping.md,
// "Names"). Two source objects whose copies would get one target namespace and name are a
// conflict: neither overwrites the other's copy.
type ResourceMappingNaming struct {
	// namespace returns the copy's target namespace, for example
	// `"tenant-" + source.cluster + "-" + source.namespace`. Namespaced resources only; without it the
	// mapper's --namespace-mapping decides.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Namespace string `json:"namespace,omitempty"`
	// name returns the copy's name, for example `source.name + "-" + location`. Without it the copy
	// keeps the source object's name.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Name string `json:"name,omitempty"`
}

// RelatedOrigin says on which side a related object is created.
//
// +kubebuilder:validation:Enum=Source;Target
type RelatedOrigin string

const (
	// RelatedOriginSource: the related object is a source object; it follows the main object
	// to the main object's locations and leaves with it.
	RelatedOriginSource RelatedOrigin = "Source"
	// RelatedOriginTarget: the related object is created on the target (by an operator, for
	// the main object's copy); the mapper copies it up into the source, through its view.
	RelatedOriginTarget RelatedOrigin = "Target"
)

// RelatedResource is one kind of object that belongs with each object of a mapping's source
// resource.
//
// +kubebuilder:validation:XValidation:rule="self.origin == 'Target' || !has(self.name)",message="name is the name of a copy brought up from the target: only for origin Target"
type RelatedResource struct {
	// identifier names the entry within its mapping (a DNS-1123 label); it is part of the
	// default name and of the labels of the copies brought up from the target.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Identifier string `json:"identifier"`
	// origin is Source or Target.
	Origin RelatedOrigin `json:"origin"`
	// resource is the namespaced resource of the related objects, as the side they are
	// created on serves it (origin Source: the source; origin Target: the target, and the
	// copies brought up are written in the source as the same resource). Related objects are
	// in the main object's namespace (origin Target: its copy's target namespace).
	Resource GroupVersionResource `json:"resource"`
	// object says how to find the related objects from the main object (origin Source: the
	// source object; origin Target: its copy on the target).
	Object RelatedObjectReference `json:"object"`
	// name is, for origin Target, a CEL expression returning the name of the copy brought up
	// into the source, with the variables `object` (the main source object), `related` (the
	// target's related object), `location` and `identifier`. Without it:
	// "<main object's name>-<identifier>-<location>", cut and hashed to fit 63 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Name string `json:"name,omitempty"`
}

// RelatedObjectReference finds related objects from a main object, by a name or by labels.
// CEL expressions see the main object as `object` and are compiled and evaluated with
// Kubernetes' CEL libraries and the per-expression cost limit of admission policies.
//
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.labelSelector)",message="set exactly one of name and labelSelector"
type RelatedObjectReference struct {
	// name is a CEL expression returning the related object's name, for example
	// `object.spec.configMapName` or `object.metadata.name + "-credentials"`.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Name string `json:"name,omitempty"`
	// labelSelector maps label keys to CEL expressions returning their values: the related
	// objects are those carrying every label, for example
	// {"app.kubernetes.io/instance": "object.metadata.name"}.
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	LabelSelector map[string]string `json:"labelSelector,omitempty"`
}

// ResourceMappingTarget names a resource of the target cluster and its kind.
type ResourceMappingTarget struct {
	GroupVersionResource `json:",inline"`
	// kind is the kind of the target resource ("Gadget"): the copies' kind.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	Kind string `json:"kind"`
}

// Condition types and reasons of a ResourceMapping.
const (
	// ResourceMappingAccepted is True when the mapper of a location maps the source resource
	// by the mapping (reason Accepted), False when it does not: Conflict (another
	// ResourceMapping of the location names the same source resource; neither is used). A
	// target that does not serve the target resource halts the source resource: its objects
	// say so in their outcome records (docs/mapper.md, "Outcome records").
	ResourceMappingAccepted = "Accepted"

	// ReasonAccepted: the mapping is in force.
	ReasonAccepted = "Accepted"
	// ReasonConflict: another mapping of the location names the same source resource.
	ReasonConflict = "Conflict"
	// ReasonInvalidNaming: spec.naming does not compile; the source resource is not mapped.
	ReasonInvalidNaming = "InvalidNaming"
	// ReasonInvalidRelated: an entry of spec.related of origin Target does not compile (an
	// expression, or a label key of object.labelSelector); the source resource is not mapped.
	ReasonInvalidRelated = "InvalidRelated"
	// ReasonSharedTarget: the source resource and another would be written as one target
	// resource; neither is mapped (docs/resourcemapping.md, "Shared target resources").
	ReasonSharedTarget = "SharedTargetResource"
)

// ResourceMappingStatus is what a location's mapper found.
type ResourceMappingStatus struct {
	// observedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Accepted.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ResourceMappingList is a list of ResourceMappings.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type ResourceMappingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the ResourceMappings.
	Items []ResourceMapping `json:"items"`
}

// The condition mapper-controller writes on a ResourceMapping at the source (beside the
// mappers' Accepted, with its own field manager: docs/resourcemapping.md, "Related objects:
// origin Source").
const (
	// ResourceMappingRelatedResolved is True (reason Resolved) when every entry of origin
	// Source of spec.related compiled and evaluated on every assigned object of spec.source,
	// False when not: CompilationFailed, ResourceNotServed (the source does not serve
	// spec.source, or mapper-controller cannot list it) or EvaluationFailed (the message counts
	// the objects and names the first). Absent on a mapping without entries of origin Source.
	ResourceMappingRelatedResolved = "RelatedResolved"

	// ReasonResolved: the related objects of origin Source were found for every assigned
	// object.
	ReasonResolved = "Resolved"
)
