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

// Placement says which objects of its namespace (and, with a kcp source, of its logical
// cluster) go to which locations (docs/design.md, "The control plane objects"). The
// placement controller of mapper-controller writes kcp.io/assigned-locations on the objects it
// selects, with server-side apply under its own field manager, and records itself in the
// annotation control.mapper.kcp.io/placement. With replicas: Divide it also writes, per chosen
// location, a spec-diff.kcp.io/<location> patch of /spec/replicas and kcp.io/status-policy:
// Summarize. By default everything it selects is one group, placed together (spreadBy); what
// the placed workloads reference follows them (dependencies, docs/dependencies.md).
// docs/placement.md has the rules.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=cluster-mapper
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Replicas",type=string,JSONPath=".spec.replicas"
// +kubebuilder:printcolumn:name="Spread",type=string,JSONPath=".spec.spreadBy",priority=1
// +kubebuilder:printcolumn:name="Locations",type=string,JSONPath=".status.locations"
// +kubebuilder:printcolumn:name="Groups",type=integer,JSONPath=".status.placedGroups"
// +kubebuilder:printcolumn:name="Objects",type=integer,JSONPath=".status.placedObjects"
// +kubebuilder:printcolumn:name="Missing",type=integer,JSONPath=".status.missingDependencies",priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].reason"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type Placement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec selects objects and locations.
	Spec PlacementSpec `json:"spec"`
	// status is what the placement controller chose and found.
	// +optional
	Status PlacementStatus `json:"status,omitempty"`
}

// Values of PlacementSpec.Replicas.
const (
	// ReplicasDuplicate: every chosen location runs the object as it is.
	ReplicasDuplicate = "Duplicate"
	// ReplicasDivide: spec.replicas is divided over the chosen locations.
	ReplicasDivide = "Divide"
)

// Values of PlacementSpec.SpreadBy.
const (
	// SpreadByNamespace: everything the Placement selects (in its namespace and logical
	// cluster) is one group, ranked once and placed on the same locations.
	SpreadByNamespace = "Namespace"
	// SpreadByObject: each selected object is ranked and placed on its own.
	SpreadByObject = "Object"
)

// Values of PlacementSpec.Dependencies.
const (
	// DependenciesFollow: what the placed workloads reference follows them to their locations.
	DependenciesFollow = "Follow"
	// DependenciesIgnore: the placed objects' references do not follow them (the same value
	// as the per-object annotation control.mapper.kcp.io/dependencies).
	DependenciesIgnore = "Ignore"
)

// PlacementSpec selects objects and the locations they go to.
// +kubebuilder:validation:XValidation:rule="has(self.locationSelector) || (has(self.locationNames) && size(self.locationNames) > 0)",message="set locationSelector or locationNames (an empty locationSelector selects every location)"
// +kubebuilder:validation:XValidation:rule="!has(self.weights) || self.replicas == 'Divide'",message="weights apply only to replicas: Divide"
type PlacementSpec struct {
	// resources are the resources whose objects are placed, named exactly (no "*").
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Resources []ResourceRule `json:"resources"`
	// objectSelector selects objects by label; empty or absent selects all.
	// +optional
	ObjectSelector *metav1.LabelSelector `json:"objectSelector,omitempty"`
	// locationSelector selects locations by the labels of their SyncTargets; empty selects
	// every location.
	// +optional
	LocationSelector *metav1.LabelSelector `json:"locationSelector,omitempty"`
	// locationNames, when set, restrict the locations to these names (and the
	// locationSelector, when also set).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=63
	LocationNames []string `json:"locationNames,omitempty"`
	// numberOfLocations, when set, is how many of the matching locations each object goes
	// to, chosen per object by rendezvous hashing; absent: all matching locations.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	NumberOfLocations *int32 `json:"numberOfLocations,omitempty"`
	// replicas is Duplicate (the default: each chosen location runs spec.replicas) or Divide
	// (spec.replicas is divided over the chosen locations, by weights when set).
	// +optional
	// +kubebuilder:default=Duplicate
	// +kubebuilder:validation:Enum=Duplicate;Divide
	Replicas string `json:"replicas,omitempty"`
	// weights of the locations when dividing; absent: equal weights.
	// +optional
	Weights *PlacementWeights `json:"weights,omitempty"`
	// notReadyTolerance is how long a location may be not Ready before its objects move
	// (default 5m); a location whose objects moved gets work again only after it has been
	// Ready and this long has passed since they moved.
	// +optional
	// +kubebuilder:default="5m"
	NotReadyTolerance *metav1.Duration `json:"notReadyTolerance,omitempty"`
	// spreadBy is the unit that is ranked and placed: Namespace (the default: everything the
	// Placement selects is one group on the same locations, so an application stays
	// together) or Object (each object on its own, to spread many independent objects).
	// +optional
	// +kubebuilder:default=Namespace
	// +kubebuilder:validation:Enum=Namespace;Object
	SpreadBy string `json:"spreadBy,omitempty"`
	// dependencies is Follow (the default: what the placed workloads reference, such as the
	// ConfigMaps and Secrets of their Pod templates, is assigned to their locations too) or
	// Ignore.
	// +optional
	// +kubebuilder:default=Follow
	// +kubebuilder:validation:Enum=Follow;Ignore
	Dependencies string `json:"dependencies,omitempty"`
}

// PlacementWeights says where the weight of a location comes from; exactly one is set.
// +kubebuilder:validation:XValidation:rule="has(self.label) != has(self.capacity)",message="set exactly one of label and capacity"
type PlacementWeights struct {
	// label is a SyncTarget label whose value is the location's weight, a non-negative
	// integer; a location without it, or with another value, has weight 0.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	Label string `json:"label,omitempty"`
	// capacity is a resource of the SyncTarget's status.capacity ("cpu", "memory", "pods")
	// whose quantity is the location's weight.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Capacity string `json:"capacity,omitempty"`
}

// Condition types and reasons of a Placement.
const (
	// PlacementReady is True when every selected object is placed by this Placement
	// (reason Placed), False otherwise: InvalidSpec, ResourceNotServed (the source does not
	// serve one of spec.resources), NoLocations (no location may take the objects),
	// Conflicts (some selected objects are assigned by someone else or an older Placement),
	// NotReadyLocations (a location is not Ready beyond the tolerance and its objects cannot
	// move), NotMirrored (the location views do not serve some placed resources or
	// dependencies, so those objects never reach a location).
	PlacementReady = "Ready"

	ReasonPlaced            = "Placed"
	ReasonInvalidSpec       = "InvalidSpec"
	ReasonNoLocations       = "NoLocations"
	ReasonConflicts         = "Conflicts"
	ReasonNotReadyLocations = "NotReadyLocations"
	ReasonWaitingForCaches  = "WaitingForCaches"
	ReasonNotMirrored       = "NotMirrored"
)

// Reasons of a PlacementConflict.
const (
	// ConflictAssignedByOther: the object's assignment was written by someone else (by
	// hand, or changed since); the Placement leaves it alone.
	ConflictAssignedByOther = "AssignedByOther"
	// ConflictOlderPlacement: an older Placement selects the object too and places it.
	ConflictOlderPlacement = "OlderPlacement"
	// ConflictYoungerPlacement: a younger Placement selects the object too; this one places it.
	ConflictYoungerPlacement = "YoungerPlacement"
	// ConflictNotDivisible: replicas is Divide and the object has no integer spec.replicas.
	ConflictNotDivisible = "NotDivisible"
)

// PlacementStatus is what the placement controller chose and found.
type PlacementStatus struct {
	// observedGeneration is the generation of the spec this status is for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// locations are the locations that hold at least one object of this Placement, sorted.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Locations []string `json:"locations,omitempty"`
	// placedObjects is the number of objects this Placement assigns.
	// +optional
	PlacedObjects int64 `json:"placedObjects,omitempty"`
	// placedGroups is the number of groups among them: placed objects with spreadBy:
	// Object, 1 with spreadBy: Namespace when any object is placed.
	// +optional
	PlacedGroups int64 `json:"placedGroups,omitempty"`
	// missingDependencies is the number of references, from the objects this Placement
	// places, to objects that do not exist (each also an Event on the referencing object).
	// The dependency controller writes it.
	// +optional
	MissingDependencies int64 `json:"missingDependencies,omitempty"`
	// unmirroredDependencies are the resources ("secrets") of objects that the placed
	// objects reference and that the location views do not serve (mapper-apiserver's
	// --resources), so that they never reach a location, sorted. The dependency controller
	// writes it.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=317
	UnmirroredDependencies []string `json:"unmirroredDependencies,omitempty"`
	// conflicts are the first 100 selected objects this Placement shares with someone else,
	// sorted by resource and name; conflictCount counts them all.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Conflicts []PlacementConflict `json:"conflicts,omitempty"`
	// conflictCount is the number of conflicts.
	// +optional
	ConflictCount int64 `json:"conflictCount,omitempty"`
	// evictions are the locations whose objects this Placement moved away because they were
	// not Ready beyond the tolerance, with when; such a location takes no work of this
	// Placement until it is Ready and the tolerance has passed since.
	// +optional
	// +listType=map
	// +listMapKey=location
	// +kubebuilder:validation:MaxItems=1000
	Evictions []LocationEviction `json:"evictions,omitempty"`
}

// PlacementConflict is one selected object this Placement does not place alone.
type PlacementConflict struct {
	// resource is the group-qualified resource ("deployments.apps").
	// +kubebuilder:validation:MaxLength=317
	Resource string `json:"resource"`
	// name is the object's name.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// reason is AssignedByOther, OlderPlacement, YoungerPlacement or NotDivisible.
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// message says who else assigns it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// LocationEviction records that a Placement moved its objects off a location.
type LocationEviction struct {
	// location is the location's name.
	// +kubebuilder:validation:MaxLength=63
	Location string `json:"location"`
	// time is when the objects moved.
	Time metav1.Time `json:"time"`
}

// PlacementList is a list of Placements.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type PlacementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Placements.
	Items []Placement `json:"items"`
}
