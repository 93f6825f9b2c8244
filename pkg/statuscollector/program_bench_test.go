package statuscollector

import (
	"fmt"
	"testing"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// BenchmarkSummarize measures one round of a StatusCollector (mapper-controller recomputes
// every collector in full every 2 s): a filter, a groupBy and three aggregations over
// objects × 10 locations, as a Deployment summary per region would. ns/op is one round;
// ns/row is per (object, location) row.
//
//	go test ./pkg/statuscollector -run XXX -bench BenchmarkSummarize -benchmem
func BenchmarkSummarize(b *testing.B) {
	p, errs := Compile(&controlv1alpha1.StatusCollectorSpec{
		Filter:  `obj.metadata.namespace == "apps"`,
		GroupBy: []controlv1alpha1.NamedExpression{{Name: "region", Expression: `location.metadata.labels["region"]`}},
		CombinedFields: []controlv1alpha1.CombinedField{
			{Name: "locations", Type: controlv1alpha1.AggregationCount},
			{Name: "replicas", Type: controlv1alpha1.AggregationSum, Subject: "returned.status.replicas"},
			{Name: "available", Type: controlv1alpha1.AggregationSum, Subject: "has(returned.status.availableReplicas) ? returned.status.availableReplicas : 0"},
		},
	})
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	for _, objects := range []int{100, 1000} {
		var rows []Row
		for i := 0; i < objects; i++ {
			obj := map[string]interface{}{"metadata": map[string]interface{}{"name": fmt.Sprintf("web-%d", i), "namespace": "apps"}}
			for l := 0; l < 10; l++ {
				rows = append(rows, Row{Object: fmt.Sprintf("apps/web-%d", i), Location: fmt.Sprintf("l%02d", l), Obj: obj,
					Status:         map[string]interface{}{"replicas": int64(3), "availableReplicas": int64(l % 4)},
					LocationLabels: map[string]string{"region": []string{"eu", "us", "ap"}[l%3]}})
			}
		}
		b.Run(fmt.Sprintf("rows=%d", len(rows)), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if res := p.Summarize(rows); res.Rows != int64(len(rows)) || len(res.Errors) > 0 {
					b.Fatalf("rows %d, errors %v", res.Rows, res.Errors)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(rows)), "ns/row")
		})
	}
}
