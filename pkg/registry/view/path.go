package view

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// requestInfoFactory parses the path below a view's base URL as kube-apiserver parses its own
// paths: /api is the legacy group, /apis/<group>/<version> the named groups.
var requestInfoFactory = &request.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// ParsePath resolves a request inside a location view into the RequestInfo kube-apiserver would
// derive for the same path, method and query on its own URL space.
//
// innerPath is the part of the URL below ".../locations/<location>/proxy" (with or without a
// leading slash, e.g. "/api/v1/namespaces/ns/configmaps/name"); query is the request's query
// (it decides list versus watch). It returns an error for paths that cannot be a Kubernetes API
// path (".." segments, empty segments); the caller answers 404.
func ParsePath(method, innerPath string, query url.Values) (*request.RequestInfo, error) {
	p := "/" + strings.TrimPrefix(innerPath, "/")
	trimmed := strings.TrimSuffix(p, "/")
	if trimmed == "" {
		trimmed = "/"
	}
	if cleaned := path.Clean(trimmed); cleaned != trimmed {
		return nil, fmt.Errorf("the path %q is not a canonical API path", innerPath)
	}
	req := &http.Request{Method: method, URL: &url.URL{Path: trimmed, RawQuery: query.Encode()}}
	return requestInfoFactory.NewRequestInfo(req)
}
