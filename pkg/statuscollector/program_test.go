package statuscollector

import (
	"errors"
	"strings"
	"testing"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// rows are three Deployments' statuses at three locations in two regions.
func rows() []Row {
	mk := func(obj, loc, region string, available int64) Row {
		return Row{Object: "apps/" + obj, Location: loc,
			Obj:            map[string]interface{}{"metadata": map[string]interface{}{"name": obj, "namespace": "apps"}},
			Status:         map[string]interface{}{"availableReplicas": available, "replicas": int64(3)},
			LocationLabels: map[string]string{"region": region}}
	}
	return []Row{mk("web", "east", "eu", 3), mk("web", "north", "eu", 1), mk("web", "west", "us", 2), mk("db", "east", "eu", 0)}
}

func mustCompile(t *testing.T, spec controlv1alpha1.StatusCollectorSpec) *Program {
	t.Helper()
	p, errs := Compile(&spec)
	if len(errs) > 0 {
		t.Fatalf("compile: %v", errs)
	}
	return p
}

// TestSummarizeByRegion: available replicas per region with count, sum, min, max and avg, a
// filter, and the one-line text.
func TestSummarizeByRegion(t *testing.T) {
	p := mustCompile(t, controlv1alpha1.StatusCollectorSpec{
		Filter:  `obj.metadata.name == "web"`,
		GroupBy: []controlv1alpha1.NamedExpression{{Name: "region", Expression: `location.metadata.labels["region"]`}},
		CombinedFields: []controlv1alpha1.CombinedField{
			{Name: "locations", Type: controlv1alpha1.AggregationCount},
			{Name: "available", Type: controlv1alpha1.AggregationSum, Subject: "returned.status.availableReplicas"},
			{Name: "least", Type: controlv1alpha1.AggregationMin, Subject: "returned.status.availableReplicas"},
			{Name: "most", Type: controlv1alpha1.AggregationMax, Subject: "returned.status.availableReplicas"},
			{Name: "mean", Type: controlv1alpha1.AggregationAvg, Subject: "returned.status.availableReplicas"},
		},
	})
	res := p.Summarize(rows())
	if res.Rows != 3 || res.GroupCount != 2 || len(res.Errors) != 0 {
		t.Fatalf("rows %d, groups %d, errors %v; want 3, 2, none", res.Rows, res.GroupCount, res.Errors)
	}
	if want := `region=eu: locations=2,available=4,least=1,most=3,mean=2; region=us: locations=1,available=2,least=2,most=2,mean=2`; res.Text != want {
		t.Errorf("text %q\nwant %q", res.Text, want)
	}
	if g := res.Groups[0]; g.GroupBy[0].Value != `"eu"` || g.Values[1].Name != "available" || g.Values[1].Value != "4" {
		t.Errorf("first group %+v", g)
	}
}

// TestSelectAndErrors: select lists rows up to the limit; a subject that is not a number and a
// failing expression are reported, not fatal; a compile error names its field.
func TestSelectAndErrors(t *testing.T) {
	p := mustCompile(t, controlv1alpha1.StatusCollectorSpec{Limit: 2,
		Select: []controlv1alpha1.NamedExpression{{Name: "available", Expression: "returned.status.availableReplicas"}, {Name: "where", Expression: "location.metadata.name"}}})
	res := p.Summarize(rows())
	if res.Rows != 4 || len(res.Selected) != 2 || res.Selected[0].Values[1].Value != `"east"` || res.Selected[0].Values[0].Value != "3" {
		t.Errorf("select: %+v", res)
	}

	p = mustCompile(t, controlv1alpha1.StatusCollectorSpec{CombinedFields: []controlv1alpha1.CombinedField{
		{Name: "bad", Type: controlv1alpha1.AggregationSum, Subject: "returned.status.phase"}}})
	res = p.Summarize(rows())
	if len(res.Errors) == 0 || !strings.Contains(res.Errors[0], "bad") {
		t.Errorf("errors %v, want the failing subject reported", res.Errors)
	}
	if _, errs := Compile(&controlv1alpha1.StatusCollectorSpec{GroupBy: []controlv1alpha1.NamedExpression{{Name: "x", Expression: "obj."}}}); len(errs) != 1 || !strings.Contains(errs[0].Error(), "spec.groupBy[0].expression") {
		t.Errorf("compile errors %v, want one naming spec.groupBy[0].expression", errs)
	}
}

// TestSummarizeWithinBudget: SummarizeWithin reports the CEL cost of a summary (the same as
// Summarize spends), and stops with ErrBudgetExceeded, counting the rows done, once it spent
// more than its budget.
func TestSummarizeWithinBudget(t *testing.T) {
	p := mustCompile(t, controlv1alpha1.StatusCollectorSpec{
		GroupBy:        []controlv1alpha1.NamedExpression{{Name: "n", Expression: `lists.range(50).map(i, lists.range(50).size()).size()`}},
		CombinedFields: []controlv1alpha1.CombinedField{{Name: "rows", Type: controlv1alpha1.AggregationCount}},
	})
	full, cost, err := p.SummarizeWithin(rows(), 0)
	if err != nil || full.Rows != 4 || cost < 4*1000 {
		t.Fatalf("without a budget: %d rows, cost %d, %v; want 4 rows costing at least 4,000", full.Rows, cost, err)
	}
	res, spent, err := p.SummarizeWithin(rows(), cost/2)
	if !errors.Is(err, ErrBudgetExceeded) || res.Rows >= 4 || spent <= cost/2 || spent > cost {
		t.Fatalf("with half the budget: %d rows, cost %d of %d, %v; want ErrBudgetExceeded before the last row", res.Rows, spent, cost, err)
	}
}
