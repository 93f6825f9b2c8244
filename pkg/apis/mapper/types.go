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
// location that has objects assigned to it. The name is the location name, a
// DNS-1123 label. Locations are computed by the server and cannot be written.
type Location struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	// Status is what the server currently observes for the location.
	Status LocationStatus
}

// LocationStatus is the observed state of a Location.
type LocationStatus struct {
	// Objects is the total number of objects assigned to the location, summed
	// over all mirrored resources.
	Objects int64

	// Resources breaks Objects down per mirrored resource, sorted by group,
	// then resource. Resources with no assigned objects are left out.
	Resources []ResourceCount

	// Clusters breaks Objects down per logical cluster of the source, sorted by
	// name. Clusters with no assigned objects are left out.
	Clusters []ClusterCount

	// Watchers is the number of watches currently open on the location's view.
	Watchers int32

	// FirstSeen is when the server first saw an object assigned to the
	// location.
	FirstSeen metav1.Time
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
