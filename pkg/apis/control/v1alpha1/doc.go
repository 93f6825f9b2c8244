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

// +k8s:deepcopy-gen=package
// +groupName=control.mapper.kcp.io

// Package v1alpha1 holds the CRD types of the control.mapper.kcp.io/v1alpha1 group: the
// objects users and controllers write in the source (docs/design.md, "The control plane
// objects"): SyncTarget, the registration of one location, and Customization, per-location
// changes of objects rendered by the views. The CRD
// manifests in artifacts/crds are generated from these types by controller-gen
// (hack/update-codegen.sh); deepcopy functions by k8s.io/code-generator's deepcopy-gen.
package v1alpha1
