package cache

import (
	goruntime "runtime"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// BenchmarkFirstListMovedGenerations measures what settleFirstListed costs a first list: the
// 10,000 objects of BenchmarkStoreHeap, assigned to one location each or to one to three, with
// metadata.generation 1 (shown at their own resourceVersion, as before) and 3 (a generation
// that has moved: shown at the list's resourceVersion, each location's view a copy until the
// object next changes: for one location its bytes with the resourceVersion replaced, for
// several rendered and encoded), stored from bytes as the server's object client reads them.
// It reports ns/object of the Replace and heap/json, the live heap over the objects' JSON.
func BenchmarkFirstListMovedGenerations(b *testing.B) {
	const total = 10_000
	raws, jsonBytes := benchObjectsJSON(b, total)
	for _, oneLocation := range []bool{true, false} {
		for _, generation := range []int64{1, 3} {
			objects := make([][]byte, len(raws))
			for i, raw := range raws {
				u := &unstructured.Unstructured{}
				if err := u.UnmarshalJSON(raw); err != nil {
					b.Fatal(err)
				}
				u.SetGeneration(generation)
				if oneLocation {
					ls, _ := contract.ParseLocations(u.GetAnnotations()[contract.AssignedLocationsAnnotation])
					setAnnotation(u, contract.AssignedLocationsAnnotation, assignedToOnly(ls[0]))
				}
				var err error
				if objects[i], err = u.MarshalJSON(); err != nil {
					b.Fatal(err)
				}
			}
			name := map[bool]string{true: "locations=1", false: "locations=1-3"}[oneLocation] + "/generation=" + strconv.FormatInt(generation, 10)
			b.Run(name, func(b *testing.B) {
				b.StopTimer()
				for n := 0; n < b.N; n++ {
					before, _ := collectedHeap()
					b.StartTimer()
					s := ingest(b, ingestPaths[1].decode, objects)
					b.StopTimer()
					after, _ := collectedHeap()
					b.ReportMetric(float64(after-before)/float64(jsonBytes), "heap/json")
					goruntime.KeepAlive(s)
					s.Close()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*total), "ns/object")
			})
		}
	}
}

// setAnnotation sets u's annotation key to value.
func setAnnotation(u *unstructured.Unstructured, key, value string) {
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[key] = value
	u.SetAnnotations(ann)
}
