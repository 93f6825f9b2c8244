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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the control plane CRDs (docs/design.md: control.mapper.kcp.io).
const GroupName = "control.mapper.kcp.io"

// SchemeGroupVersion is the group version of this package: control.mapper.kcp.io/v1alpha1.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Resource takes an unqualified resource ("synctargets") and returns it group-qualified.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// SchemeBuilder collects the functions that add the v1alpha1 types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the v1alpha1 types (SyncTarget, Customization, StatusCollector, StatusSummary, Placement, LocationBinding, DependencyRule, ResourceMapping and their lists) to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers the v1alpha1 types and the meta types of a group version.
func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&SyncTarget{},
		&SyncTargetList{},
		&Customization{},
		&CustomizationList{},
		&StatusCollector{},
		&StatusCollectorList{},
		&StatusSummary{},
		&StatusSummaryList{},
		&Placement{},
		&PlacementList{},
		&LocationBinding{},
		&LocationBindingList{},
		&DependencyRule{},
		&DependencyRuleList{},
		&ResourceMapping{},
		&ResourceMappingList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
