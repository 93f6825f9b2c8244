package customization

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// TestSelectedObjects: a Customization counts each object of its namespace and resources whose
// labels it selects once per assigned location it selects; one whose selector matches nothing
// counts 0 (and is listed); objects of other namespaces and resources are not asked for.
func TestSelectedObjects(t *testing.T) {
	web := customization("web")
	web.Spec.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	web.Spec.LocationSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}
	typo := customization("typo")
	typo.Spec.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "wbe"}}
	s, errs := NewCompiler(Options{PlainCluster: "default"}).Snapshot(1, []*controlv1alpha1.Customization{web, typo}, []Location{
		{Name: "east", Labels: map[string]string{"region": "eu"}},
		{Name: "west", Labels: map[string]string{"region": "eu"}},
		{Name: "north", Labels: map[string]string{"region": "us"}},
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	var asked []string
	got := s.SelectedObjects(func(cluster, namespace string) []Candidate {
		asked = append(asked, cluster+"|"+namespace)
		return []Candidate{
			{GVR: deploymentsGVR, Labels: map[string]string{"app": "web"}, Locations: []string{"east", "north", "west"}}, // east, west
			{GVR: deploymentsGVR, Labels: map[string]string{"app": "web"}, Locations: []string{"north"}},                 // none: us
			{GVR: deploymentsGVR, Labels: map[string]string{"app": "db"}, Locations: []string{"east"}},                   // none: labels
			{GVR: configMaps, Labels: map[string]string{"app": "web"}, Locations: []string{"east"}},                      // none: resource
			{GVR: deploymentsGVR, Labels: map[string]string{"app": "web"}},                                               // none: unassigned
		}
	})
	if len(asked) != 1 || asked[0] != "default|apps" {
		t.Errorf("asked for the objects of %v, want default|apps only", asked)
	}
	want := map[RuleKey]int64{{Cluster: "default", Namespace: "apps", Name: "web"}: 2, {Cluster: "default", Namespace: "apps", Name: "typo"}: 0}
	if len(got) != len(want) {
		t.Fatalf("SelectedObjects = %v, want %v", got, want)
	}
	for k, n := range want {
		if c, ok := got[k]; !ok || c != n {
			t.Errorf("%s selects %d (listed %v), want %d", k, c, ok, n)
		}
	}
}
