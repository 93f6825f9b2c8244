package view

import (
	"net/url"
	"strings"
	"testing"
)

func TestParsePath(t *testing.T) {
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
	}
	for _, c := range cases {
		q, _ := url.ParseQuery(c.query)
		info, err := ParsePath(c.method, c.path, q)
		if err != nil {
			t.Errorf("%s %s: %v", c.method, c.path, err)
			continue
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
	for _, bad := range []string{"/api/../apis", "/api//v1", "/api/v1/./configmaps"} {
		if _, err := ParsePath("GET", bad, nil); err == nil {
			t.Errorf("%q: want an error for a non-canonical path", bad)
		}
	}
}

// FuzzParsePath checks that no path or query makes the view's path parser panic, and that a
// path it accepts as a resource request names a resource.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"/api", "/api/v1/namespaces/a/configmaps/b", "/apis/apps/v1/deployments", "../x", "//", "/apis/a/b/c/d/e/f/g/h", "/api/v1/namespaces//x", "%2e%2e"} {
		f.Add("GET", s, "watch=true&labelSelector=a%3Db")
	}
	f.Fuzz(func(t *testing.T, method, path, rawQuery string) {
		q, _ := url.ParseQuery(rawQuery)
		info, err := ParsePath(method, path, q)
		if err != nil {
			return
		}
		if info.IsResourceRequest && info.Resource == "" {
			t.Errorf("resource request without a resource: %q → %+v", path, info)
		}
	})
}
