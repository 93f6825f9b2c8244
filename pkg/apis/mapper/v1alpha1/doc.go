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

// +k8s:openapi-gen=true
// +k8s:openapi-model-package=io.kcp.mapper.v1alpha1
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper
// +k8s:defaulter-gen=TypeMeta
// +groupName=mapper.kcp.io

// Package v1alpha1 is the v1alpha1 version of the mapper.kcp.io API group,
// served by mapper-apiserver: the read-only Location resource and the
// LocationViewOptions of its locations/proxy subresource.
package v1alpha1
