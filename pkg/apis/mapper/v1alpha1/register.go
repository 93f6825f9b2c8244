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
	"fmt"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the name of the API group served by mapper-apiserver.
const GroupName = contract.GroupName

// SchemeGroupVersion is the group version of this package: mapper.kcp.io/v1alpha1.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: contract.Version}

// Kind takes an unqualified kind and returns a group-qualified GroupKind.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}

// Resource takes an unqualified resource and returns a group-qualified GroupResource.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// SchemeBuilder collects the functions that add the v1alpha1 types, their
	// conversions and their defaulting functions to a scheme.
	SchemeBuilder runtime.SchemeBuilder
	// localSchemeBuilder is what the generated conversion code registers with;
	// it is a pointer so that registrations from init functions are kept.
	localSchemeBuilder = &SchemeBuilder
	// AddToScheme adds the v1alpha1 types, conversions and defaults to a scheme.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func init() {
	// The generated conversion functions are registered from
	// zz_generated.conversion.go's init; the defaulting functions here.
	localSchemeBuilder.Register(addKnownTypes, addDefaultingFuncs, addFieldLabelConversionFuncs)
}

// addKnownTypes registers the v1alpha1 types, and the meta types every group
// version serves (ListOptions, WatchEvent, Status, ...), with the scheme.
func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&Location{},
		&LocationList{},
		&LocationViewOptions{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}

// RegisteredFieldLabel is the field selector of a Location's status.registered: `locations`
// lists only registered locations (those with a SyncTarget) unless a field selector on it asks
// otherwise, `status.registered=false` listing the names that have assigned objects or
// watchers but no SyncTarget (docs/locations.md).
const RegisteredFieldLabel = "status.registered"

// addFieldLabelConversionFuncs makes metadata.name and status.registered the field selectors
// of Locations (kube-apiserver refuses a selector on any other field with 400, as here).
func addFieldLabelConversionFuncs(scheme *runtime.Scheme) error {
	return scheme.AddFieldLabelConversionFunc(SchemeGroupVersion.WithKind("Location"), func(label, value string) (string, string, error) {
		switch label {
		case "metadata.name":
			return label, value, nil
		case RegisteredFieldLabel:
			if value != "true" && value != "false" {
				return "", "", fmt.Errorf("field selector %s: %q is not true or false", label, value)
			}
			return label, value, nil
		}
		return "", "", fmt.Errorf("field label not supported: %s (locations support metadata.name and %s)", label, RegisteredFieldLabel)
	})
}
