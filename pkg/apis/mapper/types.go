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

package mapper

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterCount is the number of objects of one logical cluster assigned to a
// location.
type ClusterCount struct {
	// Name is the logical cluster's name (kcp.io/cluster).
	Name string

	// Objects is the number of objects of this cluster assigned to the
	// location, over all mirrored resources.
	Objects int64
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Location is a target cluster as seen by mapper-apiserver: one entry per
// location that is registered (a SyncTarget in the source) or has objects
// assigned to it. The name is the location name, a DNS-1123 label; the labels
// and creation timestamp are the SyncTarget's when it is registered.
// Locations are computed by the server and cannot be written.
type Location struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	// Status is what the server currently observes for the location.
	Status LocationStatus
}

// LocationStatus is the observed state of a Location.
type LocationStatus struct {
	// Objects is the total number of objects in the location's view (assigned to
	// it, or carrying its finalizer), summed over all mirrored resources.
	Objects int64

	// Resources breaks Objects down per mirrored resource, sorted by group,
	// then resource. Resources with no assigned objects are left out.
	Resources []ResourceCount

	// Clusters breaks Objects down per logical cluster of the source, sorted by
	// name. Clusters with no assigned objects are left out.
	Clusters []ClusterCount

	// Deleting is the number of those objects the location's view shows deleting: they
	// wait for the location to delete its copy and release its finalizer
	// (locations.mapper.kcp.io/<location>).
	Deleting int64

	// Watchers is the number of watches currently open on the location's view.
	Watchers int32

	// FirstSeen is when the server first saw an object assigned to the
	// location.
	FirstSeen metav1.Time

	// Registered is true when the location has a SyncTarget in the source.
	Registered bool

	// Paused is the SyncTarget's spec.paused: the location's mappers write and delete
	// nothing on the target.
	Paused bool

	// HaltedResources is the SyncTarget's spec.haltedResources: the resources the location's
	// mappers write and delete nothing of on the target.
	HaltedResources []string

	// Conditions are the SyncTarget's conditions (Ready, ResourcesCompatible),
	// as the location's mapper and the location lifecycle controller wrote them.
	Conditions []metav1.Condition

	// Mapper identifies the location's active mapper (from the SyncTarget).
	Mapper *LocationMapper

	// Verified are the counts of the mapper's latest verification (from the
	// SyncTarget).
	Verified *VerifiedObjects

	// Capacity is the sum of the target nodes' allocatable cpu, memory and pods
	// (from the SyncTarget).
	Capacity corev1.ResourceList

	// HeartbeatTime is the renewTime of the location's Lease in the source's
	// cluster-mapper-system namespace; nil when there is no Lease.
	HeartbeatTime *metav1.MicroTime

	// UnsyncedResources are the mirrored resources this server cannot list
	// from the source (forbidden by its RBAC, or erroring), with the reason.
	// It is a property of the server, not of the location, and is the same on
	// every Location: none of their views serves these resources.
	UnsyncedResources []UnsyncedResource

	// CustomizationFailures are, per Customization, the objects assigned to
	// the location that its mutations fail to render for the location.
	CustomizationFailures []CustomizationFailures
}

// CustomizationFailures are the objects of one location that one
// Customization fails to render.
type CustomizationFailures struct {
	// Cluster is the Customization's logical cluster.
	Cluster string
	// Namespace and Name name the Customization.
	Namespace string
	Name      string
	// FailingObjects is the number of the location's objects whose rendering
	// the Customization fails.
	FailingObjects int64
	// Failures are the first few of them.
	Failures []RenderFailure
}

// RenderFailure is one object that fails to render.
type RenderFailure struct {
	// Resource is the object's group-qualified resource.
	Resource string
	// Namespace and Name identify the object.
	Namespace string
	Name      string
	// Reason is a CamelCase word; Message says what failed.
	Reason  string
	Message string
}

// LocationMapper identifies the mapper of a location.
type LocationMapper struct {
	// Identity is the leader election identity of the active mapper.
	Identity string

	// Version is the mapper's build version.
	Version string

	// Mode is Pull (the mapper runs in the target) or Push (mapper-controller
	// runs it).
	Mode string
}

// VerifiedObjects are the numbers the mapper's verification computed.
type VerifiedObjects struct {
	// Assigned is the number of objects the location's view holds.
	Assigned int64

	// InSync is the number of assigned objects with no violation.
	InSync int64

	// InViolation is the number of violations of the mapper's invariants.
	InViolation int64

	// VerifiedTime is when the counts were computed.
	VerifiedTime *metav1.Time
}

// UnsyncedResource is a mirrored resource of the source that the server
// cannot list.
type UnsyncedResource struct {
	// Group is the API group of the resource; empty for the core group.
	Group string

	// Resource is the lower-case plural resource name.
	Resource string

	// Reason is the reason of the source's answer (Forbidden, NotFound ...),
	// Unreachable when the source was not reached, or Unknown.
	Reason string

	// Message is the error of the last attempt to list the resource.
	Message string
}

// ResourceCount is the number of objects of one resource assigned to a
// location.
type ResourceCount struct {
	// Group is the API group of the resource; empty for the core group.
	Group string

	// Resource is the lower-case plural resource name, e.g. "configmaps".
	Resource string

	// Objects is the number of objects of this resource assigned to the
	// location.
	Objects int64
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// LocationList is a list of Locations.
type LocationList struct {
	metav1.TypeMeta
	metav1.ListMeta

	// Items is the list of Locations.
	Items []Location
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// LocationViewOptions are the connect options of the locations/proxy
// subresource, the counterpart of core's PodProxyOptions.
type LocationViewOptions struct {
	metav1.TypeMeta

	// Path is the request path below the view's base URL
	// (/apis/mapper.kcp.io/v1alpha1/locations/<name>/proxy), without a leading
	// slash, e.g. "api/v1/namespaces/default/configmaps".
	Path string
}
