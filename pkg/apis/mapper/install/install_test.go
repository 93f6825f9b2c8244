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

package install

import (
	"net/url"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	serializer "k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper"
	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper/v1alpha1"
)

func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	Install(scheme)
	return scheme
}

// TestRoundTrip fuzzes every kind of the group through internal -> v1alpha1
// -> JSON/YAML -> v1alpha1 -> internal and back, which catches missing
// conversions, json tags and deepcopy mistakes.
func TestRoundTrip(t *testing.T) {
	roundtrip.RoundTripTestForAPIGroup(t, Install, nil)
}

func TestInstallRegistersKinds(t *testing.T) {
	scheme := newScheme()

	for _, kind := range []string{"Location", "LocationList", "LocationViewOptions"} {
		for _, gv := range []schema.GroupVersion{mapper.SchemeGroupVersion, v1alpha1.SchemeGroupVersion} {
			if !scheme.Recognizes(gv.WithKind(kind)) {
				t.Errorf("scheme does not recognize %v", gv.WithKind(kind))
			}
		}
	}
	// metav1.AddToGroupVersion must have run for v1alpha1.
	for _, kind := range []string{"WatchEvent", "ListOptions", "GetOptions", "DeleteOptions"} {
		if !scheme.Recognizes(v1alpha1.SchemeGroupVersion.WithKind(kind)) {
			t.Errorf("scheme does not recognize %v", v1alpha1.SchemeGroupVersion.WithKind(kind))
		}
	}

	got := scheme.PrioritizedVersionsForGroup(mapper.GroupName)
	if len(got) != 1 || got[0] != v1alpha1.SchemeGroupVersion {
		t.Errorf("PrioritizedVersionsForGroup(%q) = %v, want [%v]", mapper.GroupName, got, v1alpha1.SchemeGroupVersion)
	}
}

// TestDecodeLocationViewOptions decodes the query of a view request into the
// internal LocationViewOptions exactly as the apiserver's connect handler does:
// scope.ParameterCodec.DecodeParameters(query, <request group version>, opts),
// which converts url.Values -> v1alpha1 (generated
// Convert_url_Values_To_v1alpha1_LocationViewOptions) -> internal.
func TestDecodeLocationViewOptions(t *testing.T) {
	codec := runtime.NewParameterCodec(newScheme())

	tests := []struct {
		name  string
		query url.Values
		want  string
	}{
		{name: "path", query: url.Values{"path": {"api/v1/configmaps"}}, want: "api/v1/configmaps"},
		{name: "first path wins", query: url.Values{"path": {"apis/apps/v1", "api/v1"}}, want: "apis/apps/v1"},
		{name: "other parameters only", query: url.Values{"watch": {"true"}, "resourceVersion": {"10"}}, want: ""},
		{name: "no parameters", query: url.Values{}, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := &mapper.LocationViewOptions{}
			if err := codec.DecodeParameters(tc.query, v1alpha1.SchemeGroupVersion, opts); err != nil {
				t.Fatalf("DecodeParameters: %v", err)
			}
			if opts.Path != tc.want {
				t.Errorf("Path = %q, want %q", opts.Path, tc.want)
			}
		})
	}

	// Decoding straight into the versioned type works as well.
	versioned := &v1alpha1.LocationViewOptions{}
	if err := codec.DecodeParameters(url.Values{"path": {"api"}}, v1alpha1.SchemeGroupVersion, versioned); err != nil {
		t.Fatalf("DecodeParameters into v1alpha1: %v", err)
	}
	if versioned.Path != "api" {
		t.Errorf("v1alpha1 Path = %q, want %q", versioned.Path, "api")
	}

	// And the generated function is usable directly.
	direct := &v1alpha1.LocationViewOptions{}
	in := url.Values{"path": {"api/v1"}}
	if err := v1alpha1.Convert_url_Values_To_v1alpha1_LocationViewOptions(&in, direct, nil); err != nil {
		t.Fatalf("Convert_url_Values_To_v1alpha1_LocationViewOptions: %v", err)
	}
	if direct.Path != "api/v1" {
		t.Errorf("direct Path = %q, want %q", direct.Path, "api/v1")
	}
}

// TestConvertLocation checks the internal -> v1alpha1 conversion of a
// populated Location, and its JSON field names.
func TestConvertLocation(t *testing.T) {
	scheme := newScheme()
	codecs := serializer.NewCodecFactory(scheme)

	firstSeen := metav1.Date(2026, 1, 2, 3, 4, 5, 0, metav1.Now().Location())
	in := &mapper.Location{
		ObjectMeta: metav1.ObjectMeta{Name: "east"},
		Status: mapper.LocationStatus{
			Objects: 3,
			Resources: []mapper.ResourceCount{
				{Group: "", Resource: "configmaps", Objects: 2},
				{Group: "apps", Resource: "deployments", Objects: 1},
			},
			Watchers:  4,
			FirstSeen: firstSeen,
		},
	}
	out := &v1alpha1.Location{}
	if err := scheme.Convert(in, out, nil); err != nil {
		t.Fatalf("Convert: %v", err)
	}
	if out.Name != "east" || out.Status.Objects != 3 || out.Status.Watchers != 4 ||
		len(out.Status.Resources) != 2 || out.Status.Resources[1].Group != "apps" ||
		!out.Status.FirstSeen.Equal(&firstSeen) {
		t.Errorf("unexpected conversion result: %#v", out)
	}

	encoder := codecs.LegacyCodec(v1alpha1.SchemeGroupVersion)
	data, err := runtime.Encode(encoder, in)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	const wantPrefix = `{"kind":"Location","apiVersion":"mapper.kcp.io/v1alpha1","metadata":{"name":"east"},"status":{"objects":3,"resources":[{"group":"","resource":"configmaps","objects":2},{"group":"apps","resource":"deployments","objects":1}],"watchers":4,"firstSeen":`
	if got := string(data); len(got) < len(wantPrefix) || got[:len(wantPrefix)] != wantPrefix {
		t.Errorf("JSON =\n%s\nwant prefix\n%s", got, wantPrefix)
	}
}
