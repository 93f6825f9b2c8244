package contract

import (
	"strings"
	"testing"
)

func TestParseInnerRequest(t *testing.T) {
	cases := []struct {
		method, path, query string
		resource            bool
		verb, group, ver    string
		res, ns, name, sub  string
	}{
		{"GET", "/api", "", false, "", "", "", "", "", "", ""},
		{"GET", "api/v1", "", false, "", "", "", "", "", "", ""},
		{"GET", "/apis/apps/v1", "", false, "", "", "", "", "", "", ""},
		{"GET", "/api/v1/configmaps", "", true, "list", "", "v1", "configmaps", "", "", ""},
		{"GET", "/api/v1/configmaps", "watch=true", true, "watch", "", "v1", "configmaps", "", "", ""},
		{"GET", "/api/v1/namespaces/ns/configmaps/cm", "", true, "get", "", "v1", "configmaps", "ns", "cm", ""},
		{"GET", "/apis/apps/v1/namespaces/ns/deployments", "", true, "list", "apps", "v1", "deployments", "ns", "", ""},
		{"PUT", "/apis/apps/v1/namespaces/ns/deployments/d/status", "", true, "update", "apps", "v1", "deployments", "ns", "d", "status"},
		{"DELETE", "/api/v1/namespaces/ns/configmaps", "", true, "deletecollection", "", "v1", "configmaps", "ns", "", ""},
		{"GET", "/api/v1/namespaces", "", true, "list", "", "v1", "namespaces", "", "", ""},
		{"GET", "/api/v1/namespaces/ns", "", true, "get", "", "v1", "namespaces", "ns", "ns", ""},
		// watch as kube-apiserver reads it: any true value, and the legacy /watch/ paths.
		{"GET", "/api/v1/configmaps", "watch=1", true, "watch", "", "v1", "configmaps", "", "", ""},
		{"GET", "/api/v1/watch/configmaps", "", true, "watch", "", "v1", "configmaps", "", "", ""},
		{"GET", "/api/v1/watch/namespaces/ns/configmaps/cm", "", true, "watch", "", "v1", "configmaps", "ns", "cm", ""},
		{"GET", "/api/v1/namespaces/ns/configmaps/cm", "watch=true", true, "get", "", "v1", "configmaps", "ns", "cm", ""},
		{"PUT", "/api/v1/namespaces/ns/configmaps/cm/status", "watch=true", true, "update", "", "v1", "configmaps", "ns", "cm", "status"},
	}
	for _, c := range cases {
		inner, err := ParseInnerRequest(c.method, c.path, c.query)
		if err != nil {
			t.Errorf("%s %s: %v", c.method, c.path, err)
			continue
		}
		info := inner.Info
		if inner.Cluster != "" {
			t.Errorf("%s %s: cluster %q on the all-clusters path", c.method, c.path, inner.Cluster)
		}
		if info.IsResourceRequest != c.resource {
			t.Errorf("%s %s: resource request = %v", c.method, c.path, info.IsResourceRequest)
			continue
		}
		if !c.resource {
			continue
		}
		got := []string{info.Verb, info.APIGroup, info.APIVersion, info.Resource, info.Namespace, info.Name, info.Subresource}
		want := []string{c.verb, c.group, c.ver, c.res, c.ns, c.name, c.sub}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s %s?%s: got %v, want %v", c.method, c.path, c.query, got, want)
		}
	}
	for _, bad := range []string{"/api/../apis", "/api//v1", "/api/v1/./configmaps", "/clusters/UPPER/api/v1/configmaps", "/clusters/a|b/api"} {
		if _, err := ParseInnerRequest("GET", bad, ""); err == nil {
			t.Errorf("%q: want an error for a non-canonical path", bad)
		}
	}
}

// TestParseInnerRequestCluster checks the /clusters/<cluster> prefix of per-cluster views.
func TestParseInnerRequestCluster(t *testing.T) {
	inner, err := ParseInnerRequest("GET", "/clusters/root:org/api/v1/namespaces/ns/configmaps/cm", "")
	if err != nil {
		t.Fatal(err)
	}
	if inner.Cluster != "root:org" || inner.Info.Verb != "get" || inner.Info.Name != "cm" || inner.Info.Namespace != "ns" {
		t.Errorf("got cluster %q and %+v", inner.Cluster, inner.Info)
	}
	inner, err = ParseInnerRequest("GET", "/clusters/c1", "")
	if err != nil || inner.Cluster != "c1" || inner.Info.IsResourceRequest || inner.Info.Path != "/" {
		t.Errorf("cluster root: %+v %v", inner, err)
	}
}

// TestViewPath checks that ViewPath and ParseViewPath are inverses, behind any prefix.
func TestViewPath(t *testing.T) {
	for _, c := range []struct {
		prefix, location string
		cluster          ClusterName
	}{{"", "east", ""}, {"/proxy/prefix", "w-2", ""}, {"", "east", "root:org"}, {"/p", "east", "c1"}} {
		p := c.prefix + ViewPath(c.location, c.cluster)
		var part ViewPart
		if c.cluster != "" {
			part = NewViewPart([]ClusterName{c.cluster}, Shard{})
		}
		for _, path := range []string{p, p + "/"} {
			got, ok := ParseViewPath(path)
			if !ok || got.Prefix != c.prefix || got.Location != c.location || got.Cluster != c.cluster || !got.Part.Equal(part) {
				t.Errorf("ParseViewPath(%q) = %+v, %v", path, got, ok)
			}
		}
	}
	for _, bad := range []string{ViewPath("east", "") + "/api", ViewPath("East", ""), ViewPath("east", "Bad"), "/apis/mapper.kcp.io/v1alpha1/locations/east",
		ViewPath("east", "") + "x", ViewPath("east", "") + "/shards/4-of-4", ViewPath("east", "") + "/shards/1-of-4/clusters/a",
		ViewPath("east", "") + "/shards/1-of-4/api"} {
		if got, ok := ParseViewPath(bad); ok {
			t.Errorf("ParseViewPath(%q) = %+v, want not a view", bad, got)
		}
	}
}

// FuzzParseInnerRequest checks that no path or query makes the inner-request parser panic, and that a
// path it accepts as a resource request names a resource.
func FuzzParseInnerRequest(f *testing.F) {
	for _, s := range []string{"/api", "/api/v1/namespaces/a/configmaps/b", "/apis/apps/v1/deployments", "../x", "//", "/apis/a/b/c/d/e/f/g/h", "/api/v1/namespaces//x", "%2e%2e"} {
		f.Add("GET", s, "watch=true&labelSelector=a%3Db")
	}
	f.Fuzz(func(t *testing.T, method, path, rawQuery string) {
		inner, err := ParseInnerRequest(method, path, rawQuery)
		if err != nil {
			return
		}
		if info := inner.Info; info.IsResourceRequest && info.Resource == "" {
			t.Errorf("resource request without a resource: %q → %+v", path, inner.Info)
		}
	})
}
