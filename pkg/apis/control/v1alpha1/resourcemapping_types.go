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
