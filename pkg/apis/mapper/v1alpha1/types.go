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

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=get,list,watch
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Location is a target cluster as seen by mapper-apiserver: one entry per
// location that is registered (a SyncTarget of control.mapper.kcp.io in the
// source) or has objects assigned to it (via the kcp.io/assigned-locations
// annotation on source objects). It is cluster-scoped and read-only; its name
// is the location name, a DNS-1123 label, and its labels and creation
// timestamp are the SyncTarget's when it is registered. The location's view, an ordinary
// Kubernetes API holding only the objects assigned to it, is served below the
// locations/proxy subresource.
type Location struct {
	metav1.TypeMeta `json:",inline"`

	// Standard object metadata. The name is the location name.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Status is what the server currently observes for the location.
	// +optional
	Status LocationStatus `json:"status,omitempty"`
}

// LocationStatus is the observed state of a Location.
type LocationStatus struct {
	// Objects is the total number of objects assigned to the location, summed
	// over all mirrored resources.
	// +required
	Objects int64 `json:"objects"`

	// Resources breaks Objects down per mirrored resource, sorted by group,
	// then resource. Resources with no assigned objects are left out.
	// +optional
	// +listType=map
	// +listMapKey=group
	// +listMapKey=resource
	Resources []ResourceCount `json:"resources,omitempty"`

	// Clusters breaks Objects down per logical cluster of the source (the
	// kcp.io/cluster of the objects), sorted by name. Clusters with no
	// assigned objects are left out.
	// +optional
	// +listType=map
	// +listMapKey=name
	Clusters []ClusterCount `json:"clusters,omitempty"`

	// Deleting is the number of those objects the location's view shows deleting: they
	// wait for the location to delete its copy and release its finalizer
	// (locations.mapper.kcp.io/<location>).
	// +optional
	Deleting int64 `json:"deleting,omitempty"`

	// Watchers is the number of watches currently open on the location's view.
	// +required
	Watchers int32 `json:"watchers"`

	// FirstSeen is when the server first saw an object assigned to the
	// location.
	// +optional
	FirstSeen metav1.Time `json:"firstSeen,omitempty"`

	// Registered is true when the location has a SyncTarget in the source.
	// +optional
	Registered bool `json:"registered,omitempty"`

	// Paused is the SyncTarget's spec.paused: the location's mappers write and
	// delete nothing on the target.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// HaltedResources is the SyncTarget's spec.haltedResources: the resources
	// the location's mappers write and delete nothing of on the target.
	// +optional
	// +listType=set
	HaltedResources []string `json:"haltedResources,omitempty"`

	// Conditions are the SyncTarget's conditions (Ready, ResourcesCompatible),
	// as the location's mapper and the location lifecycle controller wrote them.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Mapper identifies the location's active mapper (from the SyncTarget).
	// +optional
	Mapper *LocationMapper `json:"mapper,omitempty"`

	// Verified are the counts of the mapper's latest verification (from the
	// SyncTarget).
	// +optional
	Verified *VerifiedObjects `json:"verified,omitempty"`

	// Capacity is the sum of the target nodes' allocatable cpu, memory and pods
	// (from the SyncTarget).
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`

	// HeartbeatTime is the renewTime of the location's Lease in the source's
	// cluster-mapper-system namespace; absent when there is no Lease.
	// +optional
	HeartbeatTime *metav1.MicroTime `json:"heartbeatTime,omitempty"`

	// UnsyncedResources are the mirrored resources this server cannot list
	// from the source (forbidden by its RBAC, or erroring), with the reason.
	// It is a property of the server, not of the location, and is the same on
	// every Location: none of their views serves these resources (reads of
	// them answer 429 or 503), and nothing else is blocked.
	// +optional
	// +listType=map
	// +listMapKey=group
	// +listMapKey=resource
	UnsyncedResources []UnsyncedResource `json:"unsyncedResources,omitempty"`

	// CustomizationFailures are, per Customization (by logical cluster,
	// namespace and name), the objects assigned to the location that its
	// mutations fail to render for the location: the view keeps their last
	// rendering, or withholds an object that never rendered. mapper-controller
	// writes each Customization's status (failingObjects, failures) from the
	// CustomizationFailures of every Location. Sorted by cluster, namespace,
	// name; a Customization without failures on the location is left out.
	// +optional
	// +listType=atomic
	CustomizationFailures []CustomizationFailures `json:"customizationFailures,omitempty"`
}

// MaxRenderFailures is how many failures a CustomizationFailures lists (as
// many as a Customization's status lists).
const MaxRenderFailures = 10

// CustomizationFailures are the objects of one location that one
// Customization fails to render.
type CustomizationFailures struct {
	// Cluster is the Customization's logical cluster (on a plain source, the
	// one cluster mapper-apiserver's --cluster-name names).
	// +optional
	Cluster string `json:"cluster,omitempty"`

	// Namespace is the Customization's namespace.
	// +required
	Namespace string `json:"namespace"`

	// Name is the Customization's name.
	// +required
	Name string `json:"name"`

	// FailingObjects is the number of the location's objects whose rendering
	// the Customization fails.
	// +required
	FailingObjects int64 `json:"failingObjects"`

	// Failures are the first MaxRenderFailures of them, sorted by resource,
	// namespace and name.
	// +optional
	// +listType=atomic
	Failures []RenderFailure `json:"failures,omitempty"`
}

// RenderFailure is one object that fails to render.
type RenderFailure struct {
	// Resource is the object's group-qualified resource ("deployments.apps").
	// +required
	Resource string `json:"resource"`

	// Namespace is the object's namespace; empty for a cluster-scoped object.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Name is the object's name.
	// +required
	Name string `json:"name"`

	// Reason is a CamelCase word: CompilationFailed, MatchConditionFailed,
	// MutationFailed, ProtectedFieldChanged, InternalError.
	// +required
	Reason string `json:"reason"`

	// Message says what failed (the field, then the error; truncated).
	// +optional
	Message string `json:"message,omitempty"`
}

// LocationMapper identifies the mapper of a location.
type LocationMapper struct {
	// Identity is the leader election identity of the active mapper.
	// +optional
	Identity string `json:"identity,omitempty"`

	// Version is the mapper's build version.
	// +optional
	Version string `json:"version,omitempty"`

	// Mode is Pull (the mapper runs in the target) or Push (mapper-controller
	// runs it).
	// +optional
	Mode string `json:"mode,omitempty"`
}

// VerifiedObjects are the numbers the mapper's verification computed.
type VerifiedObjects struct {
	// Assigned is the number of objects the location's view holds.
	// +required
	Assigned int64 `json:"assigned"`

	// InSync is the number of assigned objects with no violation.
	// +required
	InSync int64 `json:"inSync"`

	// InViolation is the number of violations of the mapper's invariants.
	// +required
	InViolation int64 `json:"inViolation"`

	// VerifiedTime is when the counts were computed.
	// +optional
	VerifiedTime *metav1.Time `json:"verifiedTime,omitempty"`
}

// UnsyncedResource is a mirrored resource of the source that the server
// cannot list.
type UnsyncedResource struct {
	// Group is the API group of the resource; empty for the core group.
	// +required
	Group string `json:"group"`

	// Resource is the lower-case plural resource name.
	// +required
	Resource string `json:"resource"`

	// Reason is the reason of the source's answer (Forbidden, NotFound ...),
	// Unreachable when the source was not reached, or Unknown.
	// +required
	Reason string `json:"reason"`

	// Message is the error of the last attempt to list the resource.
	// +optional
	Message string `json:"message,omitempty"`
}

// ResourceCount is the number of objects of one resource assigned to a
// location.
type ResourceCount struct {
	// Group is the API group of the resource; empty for the core group.
	// +required
	Group string `json:"group"`

	// Resource is the lower-case plural resource name, e.g. "configmaps".
	// +required
	Resource string `json:"resource"`

	// Objects is the number of objects of this resource assigned to the
	// location.
	// +required
	Objects int64 `json:"objects"`
}

// ClusterCount is the number of objects of one logical cluster assigned to a
// location.
type ClusterCount struct {
	// Name is the logical cluster's name (kcp.io/cluster).
	// +required
	Name string `json:"name"`

	// Objects is the number of objects of this cluster assigned to the
	// location, over all mirrored resources.
	// +required
	Objects int64 `json:"objects"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// LocationList is a list of Locations.
type LocationList struct {
	metav1.TypeMeta `json:",inline"`

	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items is the list of Locations.
	Items []Location `json:"items"`
}

// +k8s:conversion-gen:explicit-from=net/url.Values
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// LocationViewOptions are the connect options of the locations/proxy
// subresource, the counterpart of core's PodProxyOptions: they are decoded
// from the query of a request to
// /apis/mapper.kcp.io/v1alpha1/locations/<name>/proxy[/<path>], and the
// apiserver fills Path from the part of the URL after "view/".
type LocationViewOptions struct {
	metav1.TypeMeta `json:",inline"`

	// Path is the request path below the view's base URL
	// (/apis/mapper.kcp.io/v1alpha1/locations/<name>/proxy), without a leading
	// slash, e.g. "api/v1/namespaces/default/configmaps".
	// +optional
	Path string `json:"path,omitempty"`
}
