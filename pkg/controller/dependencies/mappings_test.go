package dependencies

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/dependencies"
)

// TestRelatedReferrer: what an assigned object's ResourceMapping entries of origin Source add
// to a round: a named related object needed at the object's locations that are the
// mapping's, a label selection at the same, nothing where the mapping is not, and a frozen
// round with the failure recorded under the mapping when an expression fails or the mapping
// does not compile.
func TestRelatedReferrer(t *testing.T) {
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	mapping := &controlv1alpha1.ResourceMapping{ObjectMeta: metav1.ObjectMeta{Name: "widgets", UID: "m1", Generation: 1}}
	entry := func(identifier, name string, selector map[string]string) *dependencies.Related {
		r, err := dependencies.CompileRelated("spec.related["+identifier+"]", &controlv1alpha1.RelatedResource{
			Identifier: identifier, Origin: controlv1alpha1.RelatedOriginSource,
			Resource: controlv1alpha1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
			Object:   controlv1alpha1.RelatedObjectReference{Name: name, LabelSelector: selector},
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	byName := entry("settings", "object.spec.configMap", nil)
	byLabels := entry("dashboards", "", map[string]string{"example.com/widget": "object.metadata.name"})
	widget := func(uid, configMap string, locations ...string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]interface{}{"name": "w-" + uid, "namespace": "apps", "uid": uid, "resourceVersion": "1"},
			"spec":     map[string]interface{}{},
		}}
		if configMap != "" {
			u.Object["spec"].(map[string]interface{})["configMap"] = configMap
		}
		u.SetAnnotations(map[string]string{contract.AssignedLocationsAnnotation: `["` + strings.Join(locations, `","`) + `"]`})
		return u
	}
	for _, tc := range []struct {
		name    string
		related []*relatedState
		obj     *unstructured.Unstructured
		// needs are "resource/name=locations", selected "labels=locations".
		needs, selected []string
		frozen          bool
		failure         string
	}{
		{name: "a name and labels, where the mapping is", obj: widget("1", "settings", "east", "north"),
			related: []*relatedState{{mapping: mapping, related: byName, within: sets.New("east", "west")}, {mapping: mapping, related: byLabels, within: sets.New("east", "west")}},
			needs:   []string{"configmaps/settings=east"}, selected: []string{"example.com/widget=w-1=east"}},
		{name: "nowhere the mapping is", obj: widget("2", "settings", "north"),
			related: []*relatedState{{mapping: mapping, related: byName, within: sets.New("east")}}},
		{name: "an expression that fails", obj: widget("3", "", "east"),
			related: []*relatedState{{mapping: mapping, related: byName, within: sets.New("east")}},
			frozen:  true, failure: "spec.related[settings].object.name: no such key: configMap"},
		{name: "a mapping that does not compile", obj: widget("4", "settings", "east"),
			related: []*relatedState{{mapping: mapping, within: sets.New("east")}}, frozen: true},
	} {
		c := &Controller{memo: map[types.UID]*memoEntry{}}
		r := &round{namespace: "apps", needs: map[string]*need{}, failures: map[string]map[string]string{}, placements: map[string]*placementInfo{}}
		c.addReferrer(context.Background(), r, referencing{gvr: widgets, related: tc.related}, tc.obj, nil)
		var needs, selected []string
		for k, n := range r.needs {
			needs = append(needs, k+"="+strings.Join(sets.List(n.locations), ","))
		}
		for _, s := range r.selected {
			selected = append(selected, s.sel.Labels.String()+"="+strings.Join(s.locations, ","))
		}
		if strings.Join(needs, " ") != strings.Join(tc.needs, " ") || strings.Join(selected, " ") != strings.Join(tc.selected, " ") {
			t.Errorf("%s: needs %v, selected %v; want %v, %v", tc.name, needs, selected, tc.needs, tc.selected)
		}
		if r.frozen != tc.frozen {
			t.Errorf("%s: frozen %v, want %v", tc.name, r.frozen, tc.frozen)
		}
		got := r.failures[mappingFailureKey("widgets")]["apps/"+tc.obj.GetName()]
		if (tc.failure == "") != (got == "") || !strings.Contains(got, tc.failure) {
			t.Errorf("%s: failure %q, want %q", tc.name, got, tc.failure)
		}
	}
}
