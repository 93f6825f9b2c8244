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

// DependencyRule says what the objects of one resource reference (docs/dependencies.md): a
// CEL expression over the object returns its references, and mapper-controller's dependency
// controller assigns each referenced object to the locations of the objects that reference
// it, as it does for what a Pod template references (which needs no rule). It is the
// counterpart of Karmada's resource interpreter operation GetDependencies.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=cluster-mapper
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Resource",type=string,JSONPath=".spec.resource.resource"
// +kubebuilder:printcolumn:name="Group",type=string,JSONPath=".spec.resource.group"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].reason"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type DependencyRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the resource and how to find the references of its objects.
	Spec DependencyRuleSpec `json:"spec"`
	// status is what the dependency controller found compiling and evaluating the rule.
	// +optional
	Status DependencyRuleStatus `json:"status,omitempty"`
}

// DependencyRuleSpec names a resource and a CEL expression returning what its objects
// reference.
type DependencyRuleSpec struct {
	// resource is the namespaced resource whose objects reference others.
	Resource GroupVersionResource `json:"resource"`
	// expression is a CEL expression over `object` (the referencing object, as JSON) that
	// returns a list of references, each a string in kubectl's TYPE/NAME form with the
	// resource in the plural and group-qualified: "configmaps/settings",
	// "gadgets.example.com/g1". A reference names an object of the referencing object's own
	// namespace (and logical cluster). For example `["configmaps/" + object.spec.configMapName]`,
	// or with an optional field `object.spec.?secrets.orValue([]).map(s, "secrets/" + s)`.
	// It is compiled and evaluated with Kubernetes' CEL libraries and the per-expression cost
	// limit of admission policies.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=5000
	Expression string `json:"expression"`
}

// GroupVersionResource names a resource exactly.
type GroupVersionResource struct {
	// group is the API group; "" is the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// version is the API version.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Version string `json:"version"`
	// resource is the resource (plural, lowercase: "widgets").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!self.contains('/')",message="name a resource, not a subresource"
	Resource string `json:"resource"`
}

// Condition types and reasons of a DependencyRule.
const (
	// DependencyRuleReady is True when the rule compiled, its resource is served and its
	// expression evaluated on every assigned object of the resource (reason Evaluated);
	// False otherwise: CompilationFailed (as for Customizations), ResourceNotServed,
	// EvaluationFailed (as for StatusCollectors: the expression failed on some objects, see
	// status.failures; the dependencies of these objects keep the locations they have).
	DependencyRuleReady = "Ready"

	// ReasonEvaluated: the expression evaluated on every assigned object of the resource.
	ReasonEvaluated = "Evaluated"
	// ReasonResourceNotServed: the source does not serve the resource (for a Placement:
	// one of its resources).
	ReasonResourceNotServed = "ResourceNotServed"
)

// MaxDependencyRuleFailures is the length limit of DependencyRuleStatus.Failures.
const MaxDependencyRuleFailures = 10

// DependencyRuleStatus is what the dependency controller found.
type DependencyRuleStatus struct {
	// observedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// failingObjects is the number of objects whose references the expression could not
	// compute.
	// +optional
	FailingObjects int64 `json:"failingObjects,omitempty"`
	// failures are the first few objects the expression failed on, sorted.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Failures []DependencyRuleFailure `json:"failures,omitempty"`
}

// DependencyRuleFailure is one object whose references a DependencyRule could not compute.
type DependencyRuleFailure struct {
	// namespace is the object's namespace.
	// +kubebuilder:validation:MaxLength=253
	Namespace string `json:"namespace"`
	// name is the object's name.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// message says what failed.
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message"`
}

// DependencyRuleList is a list of DependencyRules.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type DependencyRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the DependencyRules.
	Items []DependencyRule `json:"items"`
}
