package cache

import (
	"fmt"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// partFixture is a kcp store whose location "east" holds 3 objects in each of 12 namespaces of
// 5 logical clusters (whose names sort differently as names and as key prefixes: "a-b" < "a"
// as keys), and "west" one object per namespace.
func partFixture(t testing.TB) (*ResourceStore, []*unstructured.Unstructured) {
	s := newTestStore(t, StoreOptions{ClusterFromAnnotation: true})
	var objs []*unstructured.Unstructured
	rv := uint64(0)
	for _, c := range []string{"a", "a-b", "b", "root:org", "z"} {
		for n := 0; n < 12; n++ {
			ns := fmt.Sprintf("ns-%02d", n)
			for _, name := range []string{"x", "y", "z"} {
				rv++
				l := locs("east")
				if name == "z" {
					l = locs("east", "west")
				}
				objs = append(objs, withUID(cm(ns, name, rv, l, "a:kcp.io/cluster="+c), fmt.Sprintf("u%d", rv)))
			}
		}
	}
	mustReplace(t, s, 1000, objs...)
	return s, objs
}

// testParts are the parts TestPartListsAndWatches checks.
func testParts() []contract.ViewPart {
	var parts []contract.ViewPart
	for i := 0; i < 4; i++ {
		parts = append(parts, contract.ViewPart{Shard: contract.Shard{Index: i, Count: 4}})
	}
	parts = append(parts,
		contract.NewViewPart([]contract.ClusterName{"a", "a-b"}, contract.Shard{}),
		contract.NewViewPart([]contract.ClusterName{"root:org", "a"}, contract.Shard{Index: 1, Count: 3}),
		contract.NewViewPart([]contract.ClusterName{"missing"}, contract.Shard{}),
	)
	return parts
}

// wantKeys filters the whole location's list by part.Contains: what a part must serve.
func wantKeys(t *testing.T, s *ResourceStore, part contract.ViewPart) []string {
	t.Helper()
	all, err := s.List("east", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range all.Items {
		if part.Contains(o.Cluster(), o.Unstructured().GetNamespace()) {
			out = append(out, string(o.Key()))
		}
	}
	return out
}

// TestPartListsAndWatches checks that a part's list (whole and paged), namespaces, initial
// watch events and live events are exactly the location's objects in the part, in key order.
func TestPartListsAndWatches(t *testing.T) {
	s, objs := partFixture(t)
	sizes := map[int]int{}
	for _, part := range testParts() {
		want := wantKeys(t, s, part)
		sizes[len(want)]++
		res, err := s.List("east", ListOptions{Part: part})
		if err != nil {
			t.Fatal(err)
		}
		if got := keysOf(res.Items); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("part %q: list\n got %v\nwant %v", part.String(), got, want)
		}
		// Pages of 4, continued from the first page's snapshot.
		var paged []string
		opts := ListOptions{Part: part, Limit: 4}
		for {
			page, err := s.List("east", opts)
			if err != nil {
				t.Fatal(err)
			}
			paged = append(paged, keysOf(page.Items)...)
			if !page.More {
				break
			}
			opts.After, opts.SnapshotRV = page.Items[len(page.Items)-1].Key(), page.ResourceVersion
		}
		if strings.Join(paged, " ") != strings.Join(want, " ") {
			t.Errorf("part %q: paged list\n got %v\nwant %v", part.String(), paged, want)
		}
		nsWant := map[string]int{}
		for _, k := range want {
			_, ns, _, _ := contract.Key(k).Split()
			nsWant[ns]++
		}
		if got := s.Namespaces("east", part); fmt.Sprint(got) != fmt.Sprint(nsWant) {
			t.Errorf("part %q: namespaces %v, want %v", part.String(), got, nsWant)
		}
		w := mustWatch(t, s, "east", WatchOptions{Part: part, InitialEvents: true})
		var initial []string
		for range want {
			initial = append(initial, string(next(t, w).Object.(*Object).Key()))
		}
		if strings.Join(initial, " ") != strings.Join(want, " ") {
			t.Errorf("part %q: initial events\n got %v\nwant %v", part.String(), initial, want)
		}
		expectNothing(t, w)
	}
	if sizes[0] != 1 || len(sizes) < 4 {
		t.Fatalf("the parts are not distinct enough to test anything: sizes %v", sizes)
	}

	// Live events: every object changes once; each shard watch gets exactly its own.
	parts := testParts()[:4]
	ws := make([]watch.Interface, len(parts))
	for i, part := range parts {
		ws[i] = mustWatch(t, s, "east", WatchOptions{Part: part})
	}
	rv := uint64(2000)
	counts := make([]int, len(parts))
	for _, o := range objs {
		rv++
		u := o.DeepCopy()
		u.SetResourceVersion(fmt.Sprint(rv))
		u.Object["data"] = map[string]interface{}{"v": "2"}
		mustUpdate(t, s, u)
		for i, part := range parts {
			if part.Contains(u.GetAnnotations()[contract.ClusterAnnotation], u.GetNamespace()) {
				counts[i]++
			}
		}
	}
	for i, w := range ws {
		for n := 0; n < counts[i]; n++ {
			o := next(t, w).Object.(*Object)
			if !parts[i].Contains(o.Cluster(), o.Unstructured().GetNamespace()) {
				t.Fatalf("shard %q got %s of another shard", parts[i].String(), o.Key())
			}
		}
		expectNothing(t, w)
	}
}

// keysOf returns the keys of objs.
func keysOf(objs []*Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = string(o.Key())
	}
	return out
}

// BenchmarkShardList lists one hash shard of 4, and the whole location, of a location of
// 10,000 objects in 100 namespaces: a shard's list costs about a quarter of the whole one
// (it visits its namespaces' key ranges and seeks past the others), not the whole location.
func BenchmarkShardList(b *testing.B) {
	s := newTestStore(b, StoreOptions{})
	objs := make([]*unstructured.Unstructured, 0, 10_000)
	for i := 0; i < 10_000; i++ {
		objs = append(objs, cm(fmt.Sprintf("ns-%03d", i%100), fmt.Sprintf("obj-%05d", i), uint64(i+1), locs("east")))
	}
	mustReplace(b, s, 10_001, objs...)
	for _, c := range []struct {
		name string
		part contract.ViewPart
	}{{"whole", contract.ViewPart{}}, {"shard=1/4", contract.ViewPart{Shard: contract.Shard{Index: 1, Count: 4}}}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			// The CPU time of this goroutine's thread (RUSAGE_THREAD), which a loaded machine
			// does not inflate as it inflates the wall time.
			goruntime.LockOSThread()
			defer goruntime.UnlockOSThread()
			n, cpu0 := 0, threadCPU(b)
			for i := 0; i < b.N; i++ {
				res, err := s.List("east", ListOptions{Part: c.part})
				if err != nil {
					b.Fatal(err)
				}
				n = len(res.Items)
			}
			b.ReportMetric(float64(threadCPU(b)-cpu0)/float64(b.N), "thread-cpu-ns/op")
			b.ReportMetric(float64(n), "items")
		})
	}
}

// threadCPU returns the CPU time in nanoseconds that the calling OS thread has used (the
// caller locks its goroutine to the thread).
func threadCPU(b *testing.B) int64 {
	const rusageThread = 1 // RUSAGE_THREAD (Linux)
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
