package dependencies

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// relatedEntry returns an entry of origin Source relating ConfigMaps by name (an expression)
// or by labels (key: expression).
func relatedEntry(name string, selector map[string]string) *controlv1alpha1.RelatedResource {
	return &controlv1alpha1.RelatedResource{
		Identifier: "config", Origin: controlv1alpha1.RelatedOriginSource,
		Resource: controlv1alpha1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		Object:   controlv1alpha1.RelatedObjectReference{Name: name, LabelSelector: selector},
	}
}

// TestCompileRelatedErrors: an entry that cannot be used is refused with its field and the
// reason.
func TestCompileRelatedErrors(t *testing.T) {
	target := relatedEntry("object.spec.configMap", nil)
	target.Origin = controlv1alpha1.RelatedOriginTarget
	noVersion := relatedEntry("object.spec.configMap", nil)
	noVersion.Resource.Version = ""
	for _, tc := range []struct {
		name  string
		entry *controlv1alpha1.RelatedResource
		want  string
	}{
		{"origin Target", target, `spec.related[config].origin: "Target" is not "Source"`},
		{"no version", noVersion, "spec.related[config].resource: version and resource are required"},
		{"neither name nor labels", relatedEntry("", nil), "spec.related[config].object: set exactly one of name and labelSelector"},
		{"both name and labels", relatedEntry("object.spec.configMap", map[string]string{"app": "object.metadata.name"}), "set exactly one"},
		{"syntax", relatedEntry("object.spec.configMap +", nil), "spec.related[config].object.name: ERROR"},
		{"undeclared variable", relatedEntry("obj.spec.configMap", nil), "undeclared reference to 'obj'"},
		{"not a string", relatedEntry("object.metadata.generation + 1", nil), "spec.related[config].object.name: must return a string, but returns int"},
		{"a list, not a string", relatedEntry(`["a"]`, nil), "must return a string"},
		{"a bad label key", relatedEntry("", map[string]string{"not a key": "object.metadata.name"}), "spec.related[config].object.labelSelector[not a key]: the key is not a label key"},
		{"a label value that is not a string", relatedEntry("", map[string]string{"app": "1"}), "spec.related[config].object.labelSelector[app]: must return a string"},
	} {
		_, err := CompileRelated("spec.related[config]", tc.entry)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// TestRelatedSelect evaluates entries on a main object: a name, an optional name that is
// absent, labels, and results that are not names or label values.
func TestRelatedSelect(t *testing.T) {
	obj := map[string]interface{}{
		"metadata": map[string]interface{}{"name": "w1", "namespace": "apps"},
		"spec":     map[string]interface{}{"configMap": "settings", "count": int64(3), "bad": "Not_Valid", "tier": "gold"},
	}
	for _, tc := range []struct {
		name     string
		entry    *controlv1alpha1.RelatedResource
		want     Selection
		err      string
		wantNone bool
	}{
		{name: "a name", entry: relatedEntry("object.spec.configMap", nil), want: Selection{Name: "settings"}},
		{name: "a name from the object's name", entry: relatedEntry(`object.metadata.name + "-config"`, nil), want: Selection{Name: "w1-config"}},
		{name: "an optional name that is absent", entry: relatedEntry(`object.spec.?other.orValue("")`, nil), wantNone: true},
		{name: "a required name that is absent", entry: relatedEntry("object.spec.other", nil), err: "object.name: no such key: other"},
		{name: "an invalid name", entry: relatedEntry("object.spec.bad", nil), err: `object.name returned "Not_Valid"`},
		{name: "a dynamic result that is not a string", entry: relatedEntry("object.spec.count", nil), err: "object.name: returned int, not a string"},
		{name: "labels", entry: relatedEntry("", map[string]string{"app.kubernetes.io/instance": "object.metadata.name", "tier": "object.spec.tier"}),
			want: Selection{Labels: labels.Set{"app.kubernetes.io/instance": "w1", "tier": "gold"}}},
		{name: "an invalid label value", entry: relatedEntry("", map[string]string{"app": `object.spec.bad + "!"`}), err: `object.labelSelector[app] returned "Not_Valid!"`},
		{name: "a label value that fails", entry: relatedEntry("", map[string]string{"app": "object.spec.missing"}), err: "object.labelSelector[app]: no such key: missing"},
	} {
		r, err := CompileRelated("spec.related[config]", tc.entry)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		sel, err := r.Select(context.Background(), obj)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v (%+v), want an error with %q", tc.name, err, sel, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantNone:
			if !sel.Empty() {
				t.Errorf("%s: %+v, want no selection", tc.name, sel)
			}
		case sel.Name != tc.want.Name || !labels.Equals(sel.Labels, tc.want.Labels) || sel.Resource != ConfigMaps:
			t.Errorf("%s: %+v, want %+v of configmaps", tc.name, sel, tc.want)
		}
	}
}
