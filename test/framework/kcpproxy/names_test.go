package kcpproxy

import (
	"strings"
	"testing"
)

func TestBackingNamespaceRoundTrip(t *testing.T) {
	for _, tc := range []struct{ cluster, ns, want string }{
		{"c1", "default", "c1--default"},
		{"team-a", "x--y", "team-a--x--y"}, // a namespace may contain the separator
		{"a", "-", ""},                     // not a namespace
		{"a--b", "ns", ""},                 // a cluster may not
		{"root:org", "ns", ""},             // kcp's path-like names are refused
		{"c", strings.Repeat("n", 61), ""}, // 64 characters
		{"c", strings.Repeat("n", 60), "c--" + strings.Repeat("n", 60)},
	} {
		got, err := BackingNamespace(tc.cluster, tc.ns)
		if tc.want == "" {
			if err == nil {
				t.Errorf("BackingNamespace(%q, %q) = %q, want an error", tc.cluster, tc.ns, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("BackingNamespace(%q, %q) = %q, %v; want %q", tc.cluster, tc.ns, got, err, tc.want)
			continue
		}
		c, ns, ok := SplitBackingNamespace(got)
		if !ok || c != tc.cluster || ns != tc.ns {
			t.Errorf("SplitBackingNamespace(%q) = %q, %q, %v; want %q, %q", got, c, ns, ok, tc.cluster, tc.ns)
		}
	}
}

func TestSplitBackingNamespaceOutsideClusters(t *testing.T) {
	for _, b := range []string{"default", "kube-system", "a---b", "--ns", "c--"} {
		if c, ns, ok := SplitBackingNamespace(b); ok {
			t.Errorf("SplitBackingNamespace(%q) = %q, %q; want no cluster", b, c, ns)
		}
	}
}
