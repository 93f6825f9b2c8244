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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SyncTarget is the registration of one location (docs/design.md, "The control plane objects"):
// metadata.name is the location name (a DNS-1123 label), its labels are the location's
// properties (region, zone, tier ...). The location's active mapper writes its status; the
// location lifecycle controller of mapper-controller sets the Ready condition to Unknown
// when the mapper's Lease (cluster-mapper-system/<name>) is no longer renewed.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=cluster-mapper
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a location name: a DNS-1123 label (lowercase alphanumerics and '-', starting and ending with an alphanumeric, at most 63 characters)"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].reason",priority=1
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=".status.mapper.mode"
// +kubebuilder:printcolumn:name="Assigned",type=integer,JSONPath=".status.objects.assigned"
// +kubebuilder:printcolumn:name="In-Sync",type=integer,JSONPath=".status.objects.inSync"
// +kubebuilder:printcolumn:name="Violations",type=integer,JSONPath=".status.objects.inViolation"
// +kubebuilder:printcolumn:name="Paused",type=boolean,JSONPath=".spec.paused"
// +kubebuilder:printcolumn:name="Halted",type=string,JSONPath=".spec.haltedResources",priority=1
// +kubebuilder:printcolumn:name="Unschedulable",type=boolean,JSONPath=".spec.unschedulable",priority=1
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=".status.mapper.version",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type SyncTarget struct {
	metav1.TypeMeta `json:",inline"`
	// metadata.name is the location name.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the location's owner asks for.
	// +optional
	Spec SyncTargetSpec `json:"spec,omitempty"`
	// status is what the location's mapper and the location lifecycle controller observe.
	// +optional
	Status SyncTargetStatus `json:"status,omitempty"`
}

// SyncTargetSpec is the desired state of a location.
type SyncTargetSpec struct {
	// unschedulable marks the location as taking no new assignments (as a Node's
	// spec.unschedulable); objects already assigned stay.
	// +optional
	Unschedulable bool `json:"unschedulable,omitempty"`
	// kubeconfigSecretRef, when set, selects push mode: mapper-controller runs the
	// location's mapper in-process with the kubeconfig in this Secret (key "kubeconfig")
	// to reach the target. Absent: pull mode, the mapper runs in the target.
	// +optional
	KubeconfigSecretRef *SecretReference `json:"kubeconfigSecretRef,omitempty"`
	// paused stops every write and delete of the location's mappers on the target: nothing
	// is applied, deleted, unmarked or swept until it is false again, and then every object
	// of the view is synced. The mappers keep renewing their Lease, writing this status and
	// writing status back; each object they would change carries the outcome record Paused
	// (outcome.kcp.io/<location>). Pausing never deletes anything (docs/mapper.md, "Pausing").
	// +optional
	Paused bool `json:"paused,omitempty"`
	// haltedResources pauses only the named resources of the location, as group-qualified
	// resource names ("configmaps", "deployments.apps"); their objects carry the outcome
	// record ResourceHalted.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=317
	HaltedResources []string `json:"haltedResources,omitempty"`
}

// SecretReference names a Secret in the source and the key in it holding a kubeconfig.
type SecretReference struct {
	// namespace of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key in the Secret's data holding the kubeconfig; default "kubeconfig".
	// +optional
	// +kubebuilder:default=kubeconfig
	Key string `json:"key,omitempty"`
}

// Condition types of a SyncTarget.
const (
	// SyncTargetReady is True while the location's mapper renews its Lease and maps, False
	// when the mapper reports a reason it cannot (its reason is kept), Unknown when the Lease
	// has not been renewed within the grace period.
	SyncTargetReady = "Ready"
	// SyncTargetResourcesCompatible is True when the target serves every resource the view
	// serves compatibly, False when some resources are halted or have a schema on the target
	// that may refuse what the source's allows, Unknown when a schema comparison cannot tell
	// (see status.resources; docs/locations.md, "Resource compatibility").
	SyncTargetResourcesCompatible = "ResourcesCompatible"
)

// Reasons of SyncTarget conditions.
const (
	// ReasonMapperReady: the mapper is leading and renewing its Lease.
	ReasonMapperReady = "MapperReady"
	// ReasonLeaseExpired: the Lease was not renewed within the grace period (set by the
	// location lifecycle controller, as the node lifecycle controller's NodeStatusUnknown).
	ReasonLeaseExpired = "MapperLeaseExpired"
	// ReasonNoLease: there is no Lease for the location (no mapper has ever run).
	ReasonNoLease = "MapperNeverRenewed"
	// ReasonInitialSync: the mapper leads but has not processed its view once yet.
	ReasonInitialSync = "InitialSyncInProgress"
	// ReasonTargetUnreachable: the mapper cannot reach its target cluster.
	ReasonTargetUnreachable = "TargetUnreachable"
	// ReasonKubeconfigSecretMissing: push mode, and the Secret of spec.kubeconfigSecretRef
	// (or its key) does not exist; set by mapper-controller, which runs no mapper for it.
	ReasonKubeconfigSecretMissing = "KubeconfigSecretMissing"
	// ReasonKubeconfigInvalid: push mode, and the kubeconfig in the Secret cannot be used
	// (malformed, no current context, or not self-contained); set by mapper-controller.
	ReasonKubeconfigInvalid = "KubeconfigInvalid"
	// ReasonKubeconfigSecretNotAllowed: push mode, and spec.kubeconfigSecretRef names a
	// namespace mapper-controller does not read Secrets from (--push-secret-namespace).
	ReasonKubeconfigSecretNotAllowed = "KubeconfigSecretNotAllowed"
	// ReasonAllResourcesServed: the target serves every resource of the view compatibly.
	ReasonAllResourcesServed = "AllResourcesServed"
	// ReasonResourcesHalted: the target lacks some resources of the view (and others may
	// be SchemaIncompatible).
	ReasonResourcesHalted = "ResourcesHalted"
	// ReasonTargetLacksResource: a halted resource is not served by the target.
	ReasonTargetLacksResource = "TargetLacksResource"
	// ReasonSchemaIncompatible: the target serves the resource, but its schema may refuse
	// objects that the source's schema allows (a narrower type, enum or bound, an extra
	// required field, a field it drops); the message says where (docs/locations.md,
	// "Resource compatibility").
	ReasonSchemaIncompatible = "SchemaIncompatible"
	// ReasonSchemaUnknown: the target serves the resource, and whether its schema accepts
	// what the source's allows cannot be told (a pattern, a CEL rule or a combinator that
	// differs, or a schema that cannot be read); placement is not kept away by it.
	ReasonSchemaUnknown = "SchemaCompatibilityUnknown"
	// ReasonShardsNotReady: several mappers share the location (status.shards) and at least
	// one shard has no live mapper (its Lease is missing or expired) or is not ready itself;
	// the message names them.
	ReasonShardsNotReady = "ShardsNotReady"
	// ReasonObjectsInConflict: a status.resources entry of a served resource some of whose
	// objects are not mapped because their target place is taken (another source object's
	// copy, under a ResourceMapping's naming or two clusters' names, or an object the mapper
	// does not manage); the message counts them. Each one's outcome record says which.
	ReasonObjectsInConflict = "ObjectsInConflict"
	// ReasonMappingsNotAccepted: ResourcesCompatible is False because ResourceMappings of the
	// location's view are not in force (a Conflict, an Invalid mapping, a naming that does not
	// compile, a collision of target resources); the message names each one.
	ReasonMappingsNotAccepted = "ResourceMappingsNotAccepted"
)

// Mapper modes.
const (
	// ModePull: the mapper runs in the target cluster (the default).
	ModePull = "Pull"
	// ModePush: mapper-controller runs the mapper in-process from a kubeconfig Secret.
	ModePush = "Push"
)

// Resource states.
const (
	// ResourceSynced: the target serves the resource and its objects are mapped (a reason
	// SchemaIncompatible or SchemaCompatibilityUnknown says its schema there may not accept
	// all of them).
	ResourceSynced = "Synced"
	// ResourceHalted: the target does not serve the resource; its objects wait.
	ResourceHalted = "Halted"
)

// SyncTargetStatus is the observed state of a location.
type SyncTargetStatus struct {
	// conditions are Ready and ResourcesCompatible.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// mapper is the active mapper of the location.
	// +optional
	Mapper *MapperStatus `json:"mapper,omitempty"`
	// objects are the counts of the mapper's latest verification.
	// +optional
	Objects *ObjectCounts `json:"objects,omitempty"`
	// resources are the view's resources, whether each is synced or halted, and whether the
	// target's schema of a custom resource accepts what the source's allows.
	// +optional
	// +listType=map
	// +listMapKey=resource
	// +kubebuilder:validation:MaxItems=1024
	Resources []ResourceState `json:"resources,omitempty"`
	// capacity is the sum of the target nodes' allocatable cpu, memory and pods.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// shards are the mappers that share the location, one entry per shard, each written by
	// that shard's mapper; when present, objects is their sum and Ready is True only when
	// every shard of the count has a live, ready mapper (a missing shard makes it False,
	// reason ShardsNotReady). Empty when one mapper maps the whole location.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1024
	Shards []ShardStatus `json:"shards,omitempty"`
}

// ShardStatus is what the mapper of one shard of a location reports.
type ShardStatus struct {
	// name is the shard's part of the location: "shards/<index>-of-<count>",
	// "clusters/<c>[,<c>...]", or "clusters/<c>[,<c>...]/shards/<index>-of-<count>".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Name string `json:"name"`
	// identity is the leader election identity of the shard's active mapper.
	// +kubebuilder:validation:MaxLength=256
	Identity string `json:"identity"`
	// ready is the shard mapper's own Ready condition status (True, False or Unknown).
	// +kubebuilder:validation:Enum=True;False;Unknown
	Ready metav1.ConditionStatus `json:"ready"`
	// reason is the reason of the shard's Ready.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Reason string `json:"reason,omitempty"`
	// objects are the counts of the shard's latest verification of its part.
	// +optional
	Objects *ObjectCounts `json:"objects,omitempty"`
}

// MapperStatus identifies the mapper that writes a SyncTarget's status.
type MapperStatus struct {
	// identity is the leader election identity of the active mapper (host_uuid).
	// +kubebuilder:validation:MaxLength=256
	Identity string `json:"identity"`
	// version is the mapper's build version.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Version string `json:"version,omitempty"`
	// mode is Pull (the mapper runs in the target) or Push (mapper-controller runs it).
	// +kubebuilder:validation:Enum=Pull;Push
	Mode string `json:"mode"`
}

// ObjectCounts are the numbers `mapper verify` computes for a location.
type ObjectCounts struct {
	// assigned is the number of objects the location's view holds.
	Assigned int64 `json:"assigned"`
	// inSync is the number of assigned objects with no violation.
	InSync int64 `json:"inSync"`
	// inViolation is the number of violations of docs/design.md's invariants 1-4.
	InViolation int64 `json:"inViolation"`
	// verifiedTime is when the counts were computed.
	// +optional
	VerifiedTime *metav1.Time `json:"verifiedTime,omitempty"`
}

// ResourceState is the state of one resource of a location's view.
type ResourceState struct {
	// resource is the group-qualified resource ("configmaps", "deployments.apps").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Resource string `json:"resource"`
	// state is Synced or Halted.
	// +kubebuilder:validation:Enum=Synced;Halted
	State string `json:"state"`
	// reason says why a resource is halted (TargetLacksResource), or why a synced one may
	// not be served compatibly (SchemaIncompatible, SchemaCompatibilityUnknown).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Reason string `json:"reason,omitempty"`
	// message is a human-readable explanation; for a schema comparison, its findings
	// (".spec.name: maxLength 8 on the target, 64 in the source").
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// SyncTargetList is a list of SyncTargets.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type SyncTargetList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the SyncTargets.
	Items []SyncTarget `json:"items"`
}
