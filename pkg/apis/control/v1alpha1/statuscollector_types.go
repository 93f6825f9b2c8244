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

// StatusCollector says how the per-location statuses of the objects it selects are summarized
// (docs/design.md, "The control plane objects"; after KubeStellar's
// StatusCollector). It selects objects of its own namespace (and, with a kcp source, of its own
// logical cluster) by resource and labels. Each (object, location) pair with a status is one
// row, with the CEL variables `obj` (the source object), `returned` (`returned.status`: the
// status the location wrote back) and `location` (`location.metadata.name` and `.labels` of
// its SyncTarget; only locations bound to the namespace in the Bound location-access mode,
// docs/tenancy.md). Rows that pass `filter` are grouped by the values of
// `groupBy`, and each group gets the `combinedFields` (count, sum, min, max, avg); or, without
// combinedFields, the `select` expressions are listed per row. mapper-controller keeps the
// result in the StatusSummary of the same name. docs/status.md has the details.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=cluster-mapper
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].reason"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type StatusCollector struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec selects the objects and says how their statuses are summarized.
	Spec StatusCollectorSpec `json:"spec"`
	// status reports whether the expressions compile and evaluate.
	// +optional
	Status StatusCollectorStatus `json:"status,omitempty"`
}

// StatusCollectorSpec selects objects and says how their per-location statuses are summarized.
// +kubebuilder:validation:XValidation:rule="(has(self.combinedFields) && size(self.combinedFields) > 0) || (has(self.select) && size(self.select) > 0)",message="set combinedFields or select"
type StatusCollectorSpec struct {
	// resources are the resources whose objects are collected, with the syntax of a
	// Customization's resources.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Resources []ResourceRule `json:"resources"`
	// objectSelector selects objects by label; empty or absent selects all.
	// +optional
	ObjectSelector *metav1.LabelSelector `json:"objectSelector,omitempty"`
	// filter is a CEL expression returning a bool: rows for which it is false are not counted.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Filter string `json:"filter,omitempty"`
	// groupBy are named CEL expressions; rows with equal values form one group. Without
	// groupBy every row is in one group.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	GroupBy []NamedExpression `json:"groupBy,omitempty"`
	// combinedFields are computed per group.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	CombinedFields []CombinedField `json:"combinedFields,omitempty"`
	// select are named CEL expressions listed per row (at most limit rows, in object and
	// location order), when combinedFields is empty.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Select []NamedExpression `json:"select,omitempty"`
	// limit bounds the rows of select and the groups kept in the summary; default 20.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Limit int32 `json:"limit,omitempty"`
}

// NamedExpression is a CEL expression with a name.
type NamedExpression struct {
	// name names the value in the summary.
	// +kubebuilder:validation:Pattern=`^[a-zA-Z][a-zA-Z0-9_]*$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// expression is CEL over obj, returned and location.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression"`
}

// AggregationType is how a CombinedField combines the rows of a group.
// +kubebuilder:validation:Enum=Count;Sum;Min;Max;Avg
type AggregationType string

// The aggregations of a CombinedField.
const (
	AggregationCount AggregationType = "Count"
	AggregationSum   AggregationType = "Sum"
	AggregationMin   AggregationType = "Min"
	AggregationMax   AggregationType = "Max"
	AggregationAvg   AggregationType = "Avg"
)

// CombinedField is one aggregation of a group: Count counts its rows; Sum, Min, Max and Avg
// combine the numeric values of subject (a row whose subject is not a number is an error).
// +kubebuilder:validation:XValidation:rule="self.type == 'Count' || has(self.subject)",message="subject is required unless type is Count"
type CombinedField struct {
	// name names the value in the summary.
	// +kubebuilder:validation:Pattern=`^[a-zA-Z][a-zA-Z0-9_]*$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// type is Count, Sum, Min, Max or Avg.
	Type AggregationType `json:"type"`
	// subject is the CEL expression whose values are combined.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Subject string `json:"subject,omitempty"`
}

// Condition types and reasons of a StatusCollector.
const (
	// StatusCollectorReady is True when every expression compiles and evaluated on every row.
	StatusCollectorReady = "Ready"
	// StatusCollectorDegraded is True when mapper-controller skips the collector's work for its
	// namespace's limits or budgets (reasons LimitExceeded, BudgetExceeded, Throttled; the
	// StatusSummary keeps its last results), False (reason WithinBudget) otherwise.
	StatusCollectorDegraded = "Degraded"
	// ReasonSummarized: the summary is current.
	ReasonSummarized = "Summarized"
	// ReasonEvaluationFailed: an expression failed on some rows (see the summary's errors).
	ReasonEvaluationFailed = "EvaluationFailed"
)

// StatusCollectorStatus reports on a StatusCollector.
type StatusCollectorStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// StatusCollectorList is a list of StatusCollectors.
type StatusCollectorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the StatusCollectors.
	Items []StatusCollector `json:"items"`
}

// StatusSummary is the result of the StatusCollector of the same name, kept by
// mapper-controller (which owns it: it is deleted with its collector). Values are JSON.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=cluster-mapper
// +kubebuilder:printcolumn:name="Rows",type=integer,JSONPath=".results.rows"
// +kubebuilder:printcolumn:name="Groups",type=integer,JSONPath=".results.groupCount"
// +kubebuilder:printcolumn:name="Summary",type=string,JSONPath=".results.text"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type StatusSummary struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// results are the summary.
	// +optional
	Results StatusSummaryResults `json:"results,omitempty"`
}

// StatusSummaryResults is the content of a StatusSummary.
type StatusSummaryResults struct {
	// collectorGeneration is the generation of the StatusCollector summarized.
	// +optional
	CollectorGeneration int64 `json:"collectorGeneration,omitempty"`
	// rows is the number of (object, location) pairs with a status that passed the filter.
	Rows int64 `json:"rows"`
	// groupCount is the number of groups.
	// +optional
	GroupCount int64 `json:"groupCount,omitempty"`
	// groups are the groups (at most the collector's limit), in the order of their groupBy
	// values.
	// +optional
	// +listType=atomic
	Groups []SummaryGroup `json:"groups,omitempty"`
	// selected are the select rows (at most the collector's limit).
	// +optional
	// +listType=atomic
	Selected []SummaryRow `json:"selected,omitempty"`
	// text is a one-line rendering of the groups for kubectl get.
	// +optional
	Text string `json:"text,omitempty"`
	// errors are the first few evaluation errors.
	// +optional
	// +listType=atomic
	Errors []string `json:"errors,omitempty"`
}

// SummaryGroup is one group of a summary.
type SummaryGroup struct {
	// groupBy are the group's values of the groupBy expressions.
	// +optional
	// +listType=atomic
	GroupBy []NamedValue `json:"groupBy,omitempty"`
	// values are the group's combinedFields.
	// +listType=atomic
	Values []NamedValue `json:"values"`
}

// SummaryRow is one row of a select.
type SummaryRow struct {
	// object is the source object ("namespace/name").
	Object string `json:"object"`
	// location is the row's location.
	Location string `json:"location"`
	// values are the row's select values.
	// +listType=atomic
	Values []NamedValue `json:"values"`
}

// NamedValue is a named value, JSON encoded.
type NamedValue struct {
	// name is the expression's name.
	Name string `json:"name"`
	// value is the JSON of the value.
	Value string `json:"value"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// StatusSummaryList is a list of StatusSummaries.
type StatusSummaryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the StatusSummaries.
	Items []StatusSummary `json:"items"`
}
