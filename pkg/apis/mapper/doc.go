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
// +groupName=mapper.kcp.io

// Package mapper holds the internal (hub) version of the mapper.kcp.io API
// group: the read-only Location resource, which summarises what the
// mapper-apiserver knows about one location, and LocationViewOptions, the
// connect options of the locations/proxy subresource.
//
// The internal types are what the server's REST storage works with; clients
// see them only through a versioned package such as v1alpha1.
package mapper
