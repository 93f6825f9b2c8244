package mapper

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestTargetNamespace(t *testing.T) {
	long := strings.Repeat("a", 40)
	cases := []struct {
		mapping      NamespaceMapping
		cluster, ns  string
		want         string
		wantHashed   bool
		wantPrefixOf string
	}{
		{mapping: NamespaceMappingSame, cluster: "root", ns: "team-a", want: "team-a"},
		{mapping: NamespaceMappingSame, cluster: "root", ns: "", want: ""},
		{mapping: NamespaceMappingPrefixed, cluster: "root", ns: "", want: ""},
		{mapping: NamespaceMappingPrefixed, cluster: "2hwz9858cyir31hl", ns: "team-a", want: "2hwz9858cyir31hl-team-a"},
		{mapping: NamespaceMappingPrefixed, cluster: long, ns: long, wantHashed: true, wantPrefixOf: long},
		{mapping: NamespaceMappingPrefixed, cluster: "root:org:ws", ns: "default", wantHashed: true, wantPrefixOf: "root-org-ws-default"},
		{mapping: NamespaceMappingPrefixed, cluster: "Root", ns: "x", wantHashed: true, wantPrefixOf: "root-x"},
	}
	for _, c := range cases {
		got := c.mapping.TargetNamespace(c.cluster, c.ns)
		if c.ns != "" {
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Errorf("%s(%q, %q) = %q, not a valid namespace name: %v", c.mapping, c.cluster, c.ns, got, errs)
			}
		}
		if !c.wantHashed {
			if got != c.want {
				t.Errorf("%s(%q, %q) = %q, want %q", c.mapping, c.cluster, c.ns, got, c.want)
			}
			continue
		}
		if !strings.HasPrefix(got, c.wantPrefixOf[:min(len(c.wantPrefixOf), 20)]) || len(got) > 63 {
			t.Errorf("%s(%q, %q) = %q, want a shortened %q plus a hash", c.mapping, c.cluster, c.ns, got, c.wantPrefixOf)
		}
		if again := c.mapping.TargetNamespace(c.cluster, c.ns); again != got {
			t.Errorf("not stable: %q then %q", got, again)
		}
	}
}

func TestTargetNamespaceDistinguishesOriginals(t *testing.T) {
	// Both would be "root-org-ws-default" after replacing invalid characters.
	a := NamespaceMappingPrefixed.TargetNamespace("root:org", "ws-default")
	b := NamespaceMappingPrefixed.TargetNamespace("root-org:ws", "default")
	if a == b {
		t.Errorf("two originals map to the same namespace %q", a)
	}
	// Long names that share a 52-character prefix differ in their hash.
	long := strings.Repeat("x", 60)
	if NamespaceMappingPrefixed.TargetNamespace("c", long+"1") == NamespaceMappingPrefixed.TargetNamespace("c", long+"2") {
		t.Error("long names sharing a prefix collide")
	}
}

func TestParseNamespaceMapping(t *testing.T) {
	for _, s := range []string{"same", "prefixed"} {
		if _, err := ParseNamespaceMapping(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	if _, err := ParseNamespaceMapping("Same"); err == nil {
		t.Error("accepted an unknown mapping")
	}
}
