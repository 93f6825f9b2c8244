package rawjson

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unique"
	"unsafe"
)

// labelValues are 256 label keys and values as a source's objects repeat them, each made
// anew per object (the decoder's copies), as ingest hands them to the interner.
func labelValues(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("app.kubernetes.io/component-%d", i%256)
	}
	return out
}

// TestInternerKeepsOneCopy checks that Get returns one copy of equal strings, across garbage
// collections (what the cache's labels rely on), and returns long strings as they are.
func TestInternerKeepsOneCopy(t *testing.T) {
	var in Interner
	a := in.Get(strings.Clone("web"))
	runtime.GC()
	b := in.Get(strings.Clone("web"))
	if unsafe.StringData(a) != unsafe.StringData(b) {
		t.Error("two equal strings are held twice")
	}
	long := strings.Repeat("x", maxInternedLen+1)
	if got := in.Get(long); unsafe.StringData(got) != unsafe.StringData(long) {
		t.Error("a string longer than maxInternedLen was copied")
	}
}

// BenchmarkIntern interns the label values of objects as ingest does, with a garbage
// collection every 4,096 strings (a first list of 10,000 objects runs several): the Interner
// against unique.Make, whose canonical copy lives only while a Handle does (the cache keeps
// the strings, not Handles), so that after each collection it copies the strings again.
// copies/op is the strings copied per string interned.
func BenchmarkIntern(b *testing.B) {
	values := labelValues(4096)
	run := func(b *testing.B, get func(string) string) {
		b.ReportAllocs()
		seen := map[*byte]bool{}
		for i := 0; i < b.N; i++ {
			s := get(values[i%len(values)])
			if i%len(values) == len(values)-1 {
				runtime.GC()
			}
			if i < 1<<16 {
				seen[unsafe.StringData(s)] = true
			}
		}
		b.ReportMetric(float64(len(seen))/float64(min(b.N, 1<<16)), "copies/op")
	}
	b.Run("Interner", func(b *testing.B) {
		var in Interner
		run(b, in.Get)
	})
	b.Run("unique.Make", func(b *testing.B) {
		run(b, func(s string) string { return unique.Make(s).Value() })
	})
}
