//go:build tools

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

// Package tools pins the code generators that hack/update-codegen.sh runs.
// It is never built; the blank imports keep k8s.io/code-generator (and so
// its kube_codegen.sh and the generator versions it installs) and
// sigs.k8s.io/controller-tools' controller-gen (the CRD generator, run with
// `go run`) in go.mod, even across `go mod tidy`.
package tools

import (
	_ "k8s.io/code-generator"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
