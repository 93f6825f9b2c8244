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
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ExactResources returns the GroupVersionResources that rules name, in order, for the objects
// that name their resources exactly (StatusCollector, Placement: a controller starts one
// informer per resource). It fails on "*" in any field and on a subresource ("pods/status").
func ExactResources(rules []ResourceRule) ([]schema.GroupVersionResource, error) {
	var out []schema.GroupVersionResource
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, v := range r.APIVersions {
				for _, res := range r.Resources {
					if g == "*" || v == "*" || res == "*" || strings.Contains(res, "/") {
						return nil, fmt.Errorf("resources must be named exactly: no \"*\" and no subresources (got %q %q %q)", g, v, res)
					}
					out = append(out, schema.GroupVersionResource{Group: g, Version: v, Resource: res})
				}
			}
		}
	}
	return out, nil
}
