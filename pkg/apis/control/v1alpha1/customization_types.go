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
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Customization changes the objects it selects, per location, as the location views show them
// and therefore as they land on the targets (docs/design.md, "The control plane objects").
// It selects objects of its own namespace (and, with a kcp source, of its own logical cluster,
// the kcp.io/cluster annotation kcp sets on it) by resource and labels, and locations by their
// SyncTarget's labels or names. Its mutations have the shape of a MutatingAdmissionPolicy's:
// JSONPatch or ApplyConfiguration, computed by CEL from the variables `object` (the object as
// the view shows it) and `location` (the location's SyncTarget: location.metadata.name and
// .labels). Customizations that select one object apply in name order, before the
// object's own spec-diff.kcp.io/<location> patch. docs/customization.md has the details.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=cluster-mapper
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Compiled",type=string,JSONPath=".status.conditions[?(@.type==\"Compiled\")].status"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].reason",priority=1
// +kubebuilder:printcolumn:name="Selected",type=integer,JSONPath=".status.selectedObjects"
// +kubebuilder:printcolumn:name="Failing",type=integer,JSONPath=".status.failingObjects"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type Customization struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says which objects and locations are customized, and how.
	Spec CustomizationSpec `json:"spec"`

	// status is what the control plane observed while rendering with this Customization.
	// +optional
	Status CustomizationStatus `json:"status,omitempty"`
}

// CustomizationSpec selects objects (resources, labels, matchConditions) and locations
// (SyncTarget labels, names), and says how the selected objects change for each selected
// location (mutations). An object is customized for a location when every selector given holds.
//
// +kubebuilder:validation:XValidation:rule="self.mutations.all(m, m.patchType == 'JSONPatch' ? has(m.jsonPatch) && !has(m.applyConfiguration) : has(m.applyConfiguration) && !has(m.jsonPatch))",message="each mutation sets exactly the field its patchType names: jsonPatch for JSONPatch, applyConfiguration for ApplyConfiguration"
type CustomizationSpec struct {
	// resources are the resources whose objects this Customization selects, with the syntax
	// and matching rules of a MutatingAdmissionPolicy's matchConstraints.resourceRules
	// (apiGroups, apiVersions, resources; "*" matches all). Only objects of the
	// Customization's own namespace are selected (and, with a kcp source, of its own logical
	// cluster); cluster-scoped objects are never customized.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Resources []ResourceRule `json:"resources"`

	// objectSelector selects objects by their labels. Absent: every object of the resources.
	// +optional
	ObjectSelector *metav1.LabelSelector `json:"objectSelector,omitempty"`

	// locationSelector selects locations by the labels of their SyncTarget. Absent: no
	// restriction by labels. A location without a SyncTarget has no labels.
	// +optional
	LocationSelector *metav1.LabelSelector `json:"locationSelector,omitempty"`

	// locationNames selects locations by name. Absent or empty: no restriction by name. With
	// locationSelector, a location must satisfy both.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	LocationNames []string `json:"locationNames,omitempty"`

	// matchConditions are CEL expressions, as a MutatingAdmissionPolicy's, that must all be
	// true for the Customization to apply to an object for a location. They see the variables
	// object, location and variables. An error in one fails the object's rendering for the
	// location (the view keeps its last rendering; there is no failurePolicy Ignore).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	MatchConditions []admissionregistrationv1.MatchCondition `json:"matchConditions,omitempty"`

	// variables are named CEL expressions, as a MutatingAdmissionPolicy's, available to the
	// matchConditions and mutations as variables.<name>, evaluated lazily and in order.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Variables []admissionregistrationv1.Variable `json:"variables,omitempty"`

	// mutations change the object, in order, exactly as a MutatingAdmissionPolicy's
	// mutations do: patchType JSONPatch (jsonPatch.expression returns a list of JSONPatch)
	// or ApplyConfiguration (applyConfiguration.expression returns an Object, merged with
	// server-side apply's rules and the resource's schema). A mutation may not change
	// apiVersion, kind, metadata.name, metadata.namespace, metadata.uid,
	// metadata.resourceVersion, metadata.generation or status.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Mutations []admissionregistrationv1.Mutation `json:"mutations"`
}

// ResourceRule selects resources by API group, version and name, with the meaning of the same
// fields of admissionregistration/v1 Rule (without operations, scope or subresources: a
// Customization changes whole namespaced objects).
type ResourceRule struct {
	// apiGroups are the API groups of the resources; "" is the core group, "*" all groups.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	APIGroups []string `json:"apiGroups"`
	// apiVersions are the versions of the resources; "*" is all versions.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	APIVersions []string `json:"apiVersions"`
	// resources are the resources (plural, lowercase: "deployments"); "*" is all resources.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:XValidation:rule="!self.contains('/')",message="subresources cannot be customized"
	Resources []string `json:"resources"`
}

// Condition types of a Customization.
const (
	// CustomizationCompiled is True when every CEL expression of the spec compiles, False
	// (reason CompilationFailed) when one does not: then every object the Customization
	// selects fails to render for the selected locations (never silently unchanged).
	CustomizationCompiled = "Compiled"
	// CustomizationReady is True when the Customization compiled and rendered every object it
	// selects for every selected location (reason AllObjectsRendered, or NoObjectsSelected
	// when it selects none), False otherwise (CompilationFailed, RenderFailed).
	CustomizationReady = "Ready"
	// CustomizationDegraded is True when the server skips some of the Customization's work
	// for its namespace's limits or budgets (reasons LimitExceeded, BudgetExceeded, Throttled;
	// the objects it selects keep their last rendering, never shown without it), False
	// (reason WithinBudget) otherwise.
	CustomizationDegraded = "Degraded"
)

// Reasons of the Degraded condition of Customizations and StatusCollectors
// (docs/customization.md and docs/status.md, "Fairness and budgets").
const (
	// ReasonLimitExceeded: the namespace has more Customizations (or mutations, or
	// StatusCollectors) than the server applies per namespace; this one, among the newest, is
	// not applied.
	ReasonLimitExceeded = "LimitExceeded"
	// ReasonBudgetExceeded: the CEL cost of one object version's renderings (or of one
	// summary) went past the server's budget; the work was not finished.
	ReasonBudgetExceeded = "BudgetExceeded"
	// ReasonThrottled: the namespace spent its CEL budget per second; its work waits.
	ReasonThrottled = "Throttled"
	// ReasonWithinBudget: nothing is skipped.
	ReasonWithinBudget = "WithinBudget"
)

// Reasons of Customization conditions.
const (
	// ReasonCompiled: every expression compiled.
	ReasonCompiled = "Compiled"
	// ReasonCompilationFailed: an expression does not compile; the message names it.
	ReasonCompilationFailed = "CompilationFailed"
	// ReasonAllObjectsRendered: every selected object rendered for every selected location
	// (status.selectedObjects pairs, at least one).
	ReasonAllObjectsRendered = "AllObjectsRendered"
	// ReasonNoObjectsSelected: the Customization compiled and selects no (object, location)
	// pair: no object of its namespace, of the resources it names, with labels its
	// objectSelector selects, is assigned to a location it selects. Nothing failed, and
	// nothing is changed (often a selector that does not say what was meant).
	ReasonNoObjectsSelected = "NoObjectsSelected"
	// ReasonRenderFailed: some objects failed to render (see status.failures); their views
	// keep the last rendering that succeeded, or withhold an object that never rendered.
	ReasonRenderFailed = "RenderFailed"
)

// MaxCustomizationFailures is the length limit of CustomizationStatus.Failures: the first few
// failing (object, location) pairs, enough to find the problem without growing the object.
const MaxCustomizationFailures = 10

// CustomizationStatus is the observed state of a Customization.
type CustomizationStatus struct {
	// observedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions are Compiled, Ready and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// selectedObjects is the number of (object, location) pairs this Customization's
	// selectors select (resources, objectSelector, locationSelector, locationNames; the
	// matchConditions are evaluated when an object is rendered): each object of its namespace
	// it selects, once for every location the object is assigned to that it selects. 0 when it
	// selects none (Ready's reason is then NoObjectsSelected); absent until counted.
	// +optional
	SelectedObjects *int64 `json:"selectedObjects,omitempty"`
	// failingObjects is the number of (object, location) pairs whose rendering failed
	// because of this Customization.
	// +optional
	FailingObjects int64 `json:"failingObjects,omitempty"`
	// failures are the first few failing (object, location) pairs, with the reason.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Failures []CustomizationFailure `json:"failures,omitempty"`
}

// CustomizationFailure is one object that failed to render for one location.
type CustomizationFailure struct {
	// resource is the group-qualified resource of the object ("deployments.apps").
	// +kubebuilder:validation:MaxLength=317
	Resource string `json:"resource"`
	// name of the object (in the Customization's namespace).
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// location the rendering failed for.
	// +kubebuilder:validation:MaxLength=63
	Location string `json:"location"`
	// reason is a CamelCase word: CompilationFailed, MatchConditionFailed, MutationFailed,
	// ProtectedFieldChanged, BudgetExceeded, LimitExceeded, InternalError.
	// +kubebuilder:validation:MaxLength=128
	Reason string `json:"reason"`
	// message says what failed (truncated).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// CustomizationList is a list of Customizations.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type CustomizationList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Customizations.
	Items []Customization `json:"items"`
}
