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

package openapi

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	apiserveropenapi "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper/install"
	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper/v1alpha1"
)

func definitions() map[string]common.OpenAPIDefinition {
	return GetOpenAPIDefinitions(func(path string) spec.Ref {
		return spec.MustCreateRef("#/definitions/" + path)
	})
}

// TestDefinitionsMatchScheme checks that every v1alpha1 kind has a definition
// under the name the apiserver's DefinitionNamer (openapi.NewDefinitionNamer,
// built on scheme.ToOpenAPIDefinitionName) gives it; otherwise the served
// OpenAPI would lack x-kubernetes-group-version-kind for the kind.
func TestDefinitionsMatchScheme(t *testing.T) {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	defs := definitions()

	for kind := range scheme.KnownTypes(v1alpha1.SchemeGroupVersion) {
		gvk := v1alpha1.SchemeGroupVersion.WithKind(kind)
		name, err := scheme.ToOpenAPIDefinitionName(gvk)
		if err != nil {
			t.Errorf("ToOpenAPIDefinitionName(%v): %v", gvk, err)
			continue
		}
		if _, ok := defs[name]; !ok {
			t.Errorf("no OpenAPI definition %q for %v", name, gvk)
		}
	}
	for _, name := range []string{
		"io.kcp.mapper.v1alpha1.Location",
		"io.kcp.mapper.v1alpha1.LocationList",
		"io.kcp.mapper.v1alpha1.LocationStatus",
		"io.kcp.mapper.v1alpha1.ResourceCount",
		"io.kcp.mapper.v1alpha1.LocationViewOptions",
	} {
		if _, ok := defs[name]; !ok {
			t.Errorf("no OpenAPI definition %q", name)
		}
	}
}

// TestDependenciesResolve checks that every definition's dependencies are
// defined too, so the spec the server builds has no dangling references.
func TestDependenciesResolve(t *testing.T) {
	defs := definitions()
	for name, def := range defs {
		for _, dep := range def.Dependencies {
			if _, ok := defs[dep]; !ok {
				t.Errorf("definition %q depends on undefined %q", name, dep)
			}
		}
	}
}

var mapperModels = []string{
	"io.kcp.mapper.v1alpha1.Location",
	"io.kcp.mapper.v1alpha1.LocationList",
	"io.kcp.mapper.v1alpha1.LocationViewOptions",
}

// TestServedOpenAPI builds the OpenAPI v2 and v3 definitions the way the
// server does (GetOpenAPIDefinitions + openapi.NewDefinitionNamer(scheme)),
// checks the group-version-kind extension the clients rely on, and that
// server-side apply's type converter accepts the v3 schemas.
func TestServedOpenAPI(t *testing.T) {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	namer := apiserveropenapi.NewDefinitionNamer(scheme)

	v2, err := builder.BuildOpenAPIDefinitionsForResources(&common.Config{
		Info:              &spec.Info{InfoProps: spec.InfoProps{Title: "test", Version: "v0"}},
		GetDefinitions:    GetOpenAPIDefinitions,
		GetDefinitionName: namer.GetDefinitionName,
	}, mapperModels...)
	if err != nil {
		t.Fatalf("building OpenAPI v2 definitions: %v", err)
	}
	for _, name := range mapperModels {
		def, ok := v2.Definitions[name]
		if !ok {
			t.Errorf("v2: no definition %q", name)
			continue
		}
		if _, ok := def.Extensions["x-kubernetes-group-version-kind"]; !ok {
			t.Errorf("v2: definition %q has no x-kubernetes-group-version-kind", name)
		}
	}

	v3, err := builder3.BuildOpenAPIDefinitionsForResources(&common.OpenAPIV3Config{
		Info:              &spec.Info{InfoProps: spec.InfoProps{Title: "test", Version: "v0"}},
		GetDefinitions:    GetOpenAPIDefinitions,
		GetDefinitionName: namer.GetDefinitionName,
	}, mapperModels...)
	if err != nil {
		t.Fatalf("building OpenAPI v3 definitions: %v", err)
	}
	for _, name := range mapperModels {
		def, ok := v3[name]
		if !ok {
			t.Errorf("v3: no definition %q", name)
			continue
		}
		if _, ok := def.Extensions["x-kubernetes-group-version-kind"]; !ok {
			t.Errorf("v3: definition %q has no x-kubernetes-group-version-kind", name)
		}
	}

	tc, err := managedfields.NewTypeConverter(v3, false)
	if err != nil {
		t.Fatalf("NewTypeConverter: %v", err)
	}
	loc := &v1alpha1.Location{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Location"},
		ObjectMeta: metav1.ObjectMeta{Name: "east"},
		Status: v1alpha1.LocationStatus{
			Objects: 2,
			Resources: []v1alpha1.ResourceCount{
				{Group: "", Resource: "configmaps", Objects: 1},
				{Group: "apps", Resource: "deployments", Objects: 1},
			},
			FirstSeen: metav1.Now(),
		},
	}
	if _, err := tc.ObjectToTyped(loc); err != nil {
		t.Errorf("ObjectToTyped(Location): %v", err)
	}
}
