package contract

import (
	"fmt"
	"hash/fnv"
	"testing"
)

// TestShardOfIsFNV1a holds ShardOf to its documented definition: Go's 32-bit FNV-1a of
// "<cluster>|<namespace>" modulo the count.
func TestShardOfIsFNV1a(t *testing.T) {
	for _, c := range []struct{ cluster, namespace string }{{"default", "team-a"}, {"root:org", ""}, {"c1", "kube-system"}, {"", ""}} {
		h := fnv.New32a()
		_, _ = h.Write([]byte(c.cluster + "|" + c.namespace))
		for _, n := range []int{1, 2, 4, 7, MaxShards} {
			if got, want := ShardOf(c.cluster, c.namespace, n), int(h.Sum32()%uint32(n)); got != want {
				t.Errorf("ShardOf(%q, %q, %d) = %d, want %d", c.cluster, c.namespace, n, got, want)
			}
		}
	}
}

// TestShardsSpreadNamespaces checks that the hash spreads 20 namespaces over 4 shards with no
// shard empty (the e2e tests' layout), so that a shard test cannot pass with one shard doing
// everything.
func TestShardsSpreadNamespaces(t *testing.T) {
	counts := make([]int, 4)
	for i := 0; i < 20; i++ {
		counts[ShardOf("default", fmt.Sprintf("shard-ns-%02d", i), 4)]++
	}
	for i, n := range counts {
		if n == 0 {
			t.Errorf("shard %d/4 holds none of 20 namespaces: %v", i, counts)
		}
	}
}

func TestParseShard(t *testing.T) {
	for in, want := range map[string]Shard{"0/1": {0, 1}, "3/4": {3, 4}, "1023/1024": {1023, 1024}} {
		got, err := ParseShard(in)
		if err != nil || got != want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v", in, got, err, want)
		}
		if got.String() != in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), in)
		}
	}
	for _, bad := range []string{"", "1", "4/4", "-1/4", "0/0", "0/1025", "01/4", "+1/4", "a/b", "1/4/2", "1-of-4"} {
		if got, err := ParseShard(bad); err == nil {
			t.Errorf("ParseShard(%q) = %v, want an error", bad, got)
		}
	}
}

// TestParseInnerRequestPart checks the part prefixes of a view path: clusters, a hash shard,
// both, and the errors that make them 404.
func TestParseInnerRequestPart(t *testing.T) {
	cases := []struct {
		path     string
		part     ViewPart
		cluster  ClusterName
		resource string
	}{
		{"/shards/2-of-4/api/v1/configmaps", ViewPart{Shard: Shard{2, 4}}, "", "configmaps"},
		{"/clusters/b,a/api/v1/namespaces/ns/configmaps", ViewPart{Clusters: []ClusterName{"a", "b"}}, "", "configmaps"},
		{"/clusters/root:org/shards/0-of-2/apis/apps/v1/deployments", ViewPart{Clusters: []ClusterName{"root:org"}, Shard: Shard{0, 2}}, "root:org", "deployments"},
		{"/shards/0-of-1", ViewPart{Shard: Shard{0, 1}}, "", ""},
	}
	for _, c := range cases {
		inner, err := ParseInnerRequest("GET", c.path, "")
		if err != nil {
			t.Errorf("%s: %v", c.path, err)
			continue
		}
		if !inner.Part.Equal(c.part) || inner.Cluster != c.cluster || inner.Info.Resource != c.resource {
			t.Errorf("%s: part %+v cluster %q resource %q", c.path, inner.Part, inner.Cluster, inner.Info.Resource)
		}
	}
	for _, bad := range []string{"/shards/4-of-4/api", "/shards/x/api", "/shards/1of4/api", "/clusters/a,,b/api", "/clusters/a,B/api", "/clusters//api"} {
		if _, err := ParseInnerRequest("GET", bad, ""); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

// TestViewPartPaths checks that ViewPartPath and ParseViewPath are inverses for parts, and the
// names derived from a part.
func TestViewPartPaths(t *testing.T) {
	parts := []ViewPart{
		{},
		{Shard: Shard{1, 4}},
		NewViewPart([]ClusterName{"c2", "c1", "c1"}, Shard{}),
		NewViewPart([]ClusterName{"root:org"}, Shard{0, 2}),
	}
	for _, part := range parts {
		p := "/prefix" + ViewPartPath("east", part)
		for _, path := range []string{p, p + "/"} {
			got, ok := ParseViewPath(path)
			if !ok || got.Location != "east" || got.Prefix != "/prefix" || !got.Part.Equal(part) || got.Cluster != part.Cluster() {
				t.Errorf("ParseViewPath(%q) = %+v, %v; want part %+v", path, got, ok, part)
			}
		}
	}
	names := map[string]string{
		"":                                "east",
		"shards/1-of-4":                   "east.1-of-4",
		"clusters/c1,c2":                  "east.c-",
		"clusters/root:org/shards/0-of-2": "east.c-",
	}
	for _, part := range parts {
		name := ShardLeaseName("east", part)
		want := names[part.String()]
		if len(name) < len(want) || name[:len(want)] != want || LocationOfLease(name) != "east" {
			t.Errorf("ShardLeaseName(%q) = %q, want a name starting with %q", part.String(), name, want)
		}
	}
	if a, b := ShardLeaseName("east", parts[2]), ShardLeaseName("east", parts[3]); a == b {
		t.Errorf("two parts share the Lease name %q", a)
	}
}

// TestViewPartContains checks membership by cluster list and shard.
func TestViewPartContains(t *testing.T) {
	p := NewViewPart([]ClusterName{"b", "a"}, Shard{})
	if !p.Contains("a", "x") || !p.Contains("b", "") || p.Contains("c", "x") {
		t.Errorf("cluster list membership wrong")
	}
	s := ViewPart{Shard: Shard{ShardOf("a", "ns", 3), 3}}
	if !s.Contains("a", "ns") || s.Contains("a", "other") != (ShardOf("a", "other", 3) == s.Shard.Index) {
		t.Errorf("shard membership wrong")
	}
	if !(ViewPart{}).Contains("anything", "at-all") {
		t.Errorf("the whole location must contain everything")
	}
}

// BenchmarkViewPartContains is the cost of the shard check a view runs per watch event and
// shard watcher.
func BenchmarkViewPartContains(b *testing.B) {
	p := ViewPart{Shard: Shard{1, 4}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p.Contains("root:org:team-a", "kube-system-namespace")
	}
}
