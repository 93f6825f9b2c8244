package view

import "testing"

// TestServedOperations: of the source's API paths, a view's OpenAPI keeps the operations views
// serve: get on a mirrored resource's collections, objects and legacy watch paths, get, put and
// patch on its /status, get on the group version's discovery and on namespaces (no watch);
// nothing of other subresources or resources.
func TestServedOperations(t *testing.T) {
	resources := map[string]bool{"deployments": true, "namespaces": true, "configmaps": true}
	for _, c := range []struct {
		path string
		want operations
	}{
		{"/apis/apps/v1/", operations{get: true}},
		{"/apis/apps/v1/deployments", operations{get: true}},
		{"/apis/apps/v1/namespaces/{namespace}/deployments", operations{get: true}},
		{"/apis/apps/v1/namespaces/{namespace}/deployments/{name}", operations{get: true}},
		{"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status", operations{get: true, write: true}},
		{"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale", operations{}},
		{"/apis/apps/v1/watch/namespaces/{namespace}/deployments/{name}", operations{get: true}},
		{"/apis/apps/v1/watch/deployments", operations{get: true}},
		{"/apis/apps/v1/namespaces/{namespace}/statefulsets", operations{}},
		{"/api/v1/namespaces", operations{get: true}},
		{"/api/v1/namespaces/{name}", operations{get: true}},
		{"/api/v1/namespaces/{name}/status", operations{}},
		{"/api/v1/namespaces/{name}/finalize", operations{}},
		{"/api/v1/watch/namespaces", operations{}},
		{"/api/v1/namespaces/{namespace}/configmaps/{name}", operations{get: true}},
		{"/api/v1/namespaces/{namespace}/pods/{name}/log", operations{}},
	} {
		_, rest, ok := splitGroupVersionPath(c.path)
		if !ok {
			t.Fatalf("%s: not an API path", c.path)
		}
		if got := servedOperations(rest, resources); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.path, got, c.want)
		}
	}
	if _, _, ok := splitGroupVersionPath("/version"); ok {
		t.Error("/version is no group version path")
	}
}
