package contract

import "testing"

func TestRelatedCopyLocation(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   string
		ok     bool
	}{
		{map[string]string{RelatedLocationLabel: "east"}, "east", true},
		{map[string]string{RelatedLocationLabel: "east", RelatedOwnerUIDLabel: "u"}, "east", true},
		{map[string]string{RelatedLocationLabel: ""}, "", false},
		{map[string]string{RelatedLocationLabel: "East"}, "", false},
		{map[string]string{RelatedOwnerUIDLabel: "u"}, "", false},
		{nil, "", false},
	} {
		got, ok := RelatedCopyLocation(tc.labels)
		if got != tc.want || ok != tc.ok {
			t.Errorf("RelatedCopyLocation(%v) = %q, %v; want %q, %v", tc.labels, got, ok, tc.want, tc.ok)
		}
	}
}
