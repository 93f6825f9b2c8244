package statuscollector

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/locationbinding"
	"github.com/cluster-mapper/cluster-mapper/pkg/statuscollector"
)

// TestRowsOnlyOfBoundLocations: a collector sees the rows of the locations bound to its
// namespace only (a status record of another location can only have been written by hand), and
// of a location only its name and labels, never its SyncTarget's annotations.
func TestRowsOnlyOfBoundLocations(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"metadata": map[string]interface{}{"name": "web", "namespace": "tenant-a", "annotations": map[string]interface{}{
			"kcp.io/assigned-locations": `["east","west"]`,
			"status.kcp.io/east":        `{"replicas":1}`,
			"status.kcp.io/west":        `{"replicas":2}`,
		}},
	}}
	target := func(name string) *unstructured.Unstructured {
		st := &unstructured.Unstructured{}
		st.SetName(name)
		st.SetLabels(map[string]string{"region": name})
		st.SetAnnotations(map[string]string{"secret.example.com/endpoint": "10.0.0.1"})
		return st
	}
	locs := map[string]*unstructured.Unstructured{"east": target("east"), "west": target("west")}
	x := locationbinding.NewIndex([]*locationbinding.Binding{locationbinding.Compile(locationbinding.Key{Namespace: "tenant-a", Name: "b"},
		&controlv1alpha1.LocationBindingSpec{LocationNames: []string{"east"}})}, nil)

	rows := rowsOf(u, locs, x.Scope("", "tenant-a"))
	if len(rows) != 1 || rows[0].Location != "east" {
		t.Fatalf("rows = %+v, want east's only (west is not bound to tenant-a)", rows)
	}
	if open := rowsOf(u, locs, (*locationbinding.Index)(nil).Scope("", "tenant-a")); len(open) != 2 {
		t.Errorf("the Open mode gives %d rows, want 2", len(open))
	}

	p, errs := statuscollector.Compile(&controlv1alpha1.StatusCollectorSpec{Select: []controlv1alpha1.NamedExpression{
		{Name: "region", Expression: `location.metadata.labels["region"]`},
		{Name: "endpoint", Expression: `location.metadata.annotations["secret.example.com/endpoint"]`},
	}})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	res := p.Summarize(rows)
	if len(res.Errors) == 0 {
		t.Errorf("reading location.metadata.annotations succeeded: %+v", res)
	}
	for _, r := range res.Selected {
		for _, v := range r.Values {
			if v.Name == "endpoint" && v.Value != "" {
				t.Errorf("a collector read a SyncTarget annotation: %+v", r)
			}
		}
	}
}
