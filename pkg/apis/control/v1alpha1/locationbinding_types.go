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

// LocationBinding names the locations that the objects of its namespace (and, with a kcp
// source, of its logical cluster) may be sent to (docs/design.md, "The control plane objects";
// docs/tenancy.md). An administrator creates it in a tenant's namespace; tenants are not
// granted write access to it. In the Bound location-access mode (mapper-apiserver's default)
// a location's view shows an object only if a LocationBinding of the object's namespace
// selects that location, and Placements choose only among the bound locations. Several
// LocationBindings in one namespace add up (the union of what they select).
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=cluster-mapper
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Locations",type=string,JSONPath=".status.locations"
// +kubebuilder:printcolumn:name="Bound",type=integer,JSONPath=".status.boundLocations"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type LocationBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec selects the locations the namespace may use.
	Spec LocationBindingSpec `json:"spec"`
	// status is what the binding selects now.
	// +optional
	Status LocationBindingStatus `json:"status,omitempty"`
}

// LocationBindingSpec selects locations by their SyncTargets.
// +kubebuilder:validation:XValidation:rule="has(self.locationSelector) || (has(self.locationNames) && size(self.locationNames) > 0)",message="set locationSelector or locationNames (an empty locationSelector selects every registered location)"
type LocationBindingSpec struct {
	// locationSelector selects locations by the labels of their SyncTargets; an empty
	// selector selects every registered location. A location without a SyncTarget is never
	// selected by a selector.
	// +optional
	LocationSelector *metav1.LabelSelector `json:"locationSelector,omitempty"`
	// locationNames, when set, bind these locations by name (in addition to what the
	// locationSelector selects). A name binds the location whether or not its SyncTarget
	// exists yet.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	LocationNames []string `json:"locationNames,omitempty"`
}

// Condition types and reasons of a LocationBinding.
const (
	// LocationBindingReady is True when the binding's spec is valid (reason Bound), False
	// with reason InvalidSpec otherwise.
	LocationBindingReady = "Ready"

	ReasonBound = "Bound"
)

// LocationBindingStatus is what a LocationBinding selects now.
type LocationBindingStatus struct {
	// observedGeneration is the generation of the spec this status is for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// locations are the first 100 bound locations, sorted.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Locations []string `json:"locations,omitempty"`
	// boundLocations is the number of locations the binding selects.
	// +optional
	BoundLocations int64 `json:"boundLocations,omitempty"`
}

// LocationBindingList is a list of LocationBindings.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type LocationBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the LocationBindings.
	Items []LocationBinding `json:"items"`
}
