package mapper

import (
	"strings"
	"testing"
)

// TestPlacementEvidence checks that a copy counts for the mapping that put it where it is,
// and that copies no mapping explains (cluster-scoped, moved by hand) count for none.
func TestPlacementEvidence(t *testing.T) {
	var e PlacementEvidence
	e.Observe("team-a", "x", SourceRef{Cluster: "c1", Namespace: "team-a", Name: "x"})
	e.Observe("c1-team-a", "y", SourceRef{Cluster: "c1", Namespace: "team-a", Name: "y"})
	e.Observe(NamespaceMappingPrefixed.TargetNamespace("root:org", "default"), "z", SourceRef{Cluster: "root:org", Namespace: "default", Name: "z"})
	e.Observe("elsewhere", "moved", SourceRef{Cluster: "c1", Namespace: "team-a", Name: "moved"})
	e.Observe("", "node-thing", SourceRef{Cluster: "c1", Name: "node-thing"})
	if e.Same != 1 || e.Prefixed != 2 || e.SameExample != "team-a/x" || e.PrefixedExample != "c1-team-a/y" {
		t.Fatalf("evidence = %+v", e)
	}
}

// TestResolveNamespaceMapping checks the rule of --namespace-mapping=auto: the copies on the
// target decide over what the view shows (a mapping never flips on a filled target), both
// kinds of copies are an error, an empty start is undecided, and otherwise more than one
// logical cluster means prefixed.
func TestResolveNamespaceMapping(t *testing.T) {
	cases := []struct {
		name      string
		evidence  PlacementEvidence
		clusters  []string
		objects   int
		want      NamespaceMapping
		undecided bool
		wantErr   string
		wantInWhy string
	}{
		{name: "fresh target, one cluster", clusters: []string{"c1"}, objects: 3, want: NamespaceMappingSame, wantInWhy: "one logical cluster (c1)"},
		{name: "fresh target, two clusters", clusters: []string{"c2", "c1"}, objects: 3, want: NamespaceMappingPrefixed, wantInWhy: "2 logical clusters (c1, c2)"},
		{name: "fresh target, empty view", objects: 0, undecided: true},
		{name: "filled by same, a second cluster appeared", evidence: PlacementEvidence{Same: 5, SameExample: "ns/a"}, clusters: []string{"c1", "c2"}, objects: 9,
			want: NamespaceMappingSame, wantInWhy: `5 copies placed by "same" (e.g. ns/a)`},
		{name: "filled by prefixed, one cluster left", evidence: PlacementEvidence{Prefixed: 2, PrefixedExample: "c1-ns/a"}, clusters: []string{"c1"}, objects: 1,
			want: NamespaceMappingPrefixed},
		{name: "filled by prefixed, view empty", evidence: PlacementEvidence{Prefixed: 2, PrefixedExample: "c1-ns/a"}, want: NamespaceMappingPrefixed},
		{name: "both", evidence: PlacementEvidence{Same: 1, SameExample: "ns/a", Prefixed: 1, PrefixedExample: "c1-ns/b"}, clusters: []string{"c1"}, objects: 2,
			wantErr: "both namespace mappings"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, why, decided, err := ResolveNamespaceMapping(c.evidence, c.clusters, c.objects)
			switch {
			case c.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "ns/a") || !strings.Contains(err.Error(), "c1-ns/b") {
					t.Fatalf("err = %v, want one containing %q and both examples", err, c.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case c.undecided:
				if decided {
					t.Fatalf("decided %q (%s) on an empty view and target", got, why)
				}
			case !decided || got != c.want || !strings.Contains(why, c.wantInWhy):
				t.Fatalf("got %q decided=%v why=%q, want %q with %q", got, decided, why, c.want, c.wantInWhy)
			}
		})
	}
}
