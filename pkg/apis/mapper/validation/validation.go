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

// Package validation holds validation helpers for the mapper.kcp.io API.
package validation

import (
	"k8s.io/apimachinery/pkg/util/validation"
)

// ValidateLocationName checks that name is a valid location name: a DNS-1123
// label (lowercase alphanumerics and '-', starting and ending with an
// alphanumeric, at most 63 characters). It returns nil for a valid name, and
// otherwise one or more messages describing the problem, phrased to follow
// the name, e.g. fmt.Sprintf("invalid location name %q: %s", name,
// strings.Join(msgs, "; ")), so they can go into a Status as they are.
func ValidateLocationName(name string) []string {
	if name == "" {
		return []string{"must not be empty"}
	}
	return validation.IsDNS1123Label(name)
}
