package contract

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// innerRequestInfoFactory parses the path inside a view as kube-apiserver parses its own URL
// space: /api is the legacy group, /apis/<group>/<version> the named groups, and the legacy
// /api/v1/watch/... paths are watches.
var innerRequestInfoFactory = &request.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// InnerRequest is a request inside a location view.
type InnerRequest struct {
	// Part is the part of the location the path selects below the view's base: the logical
	// clusters of a /clusters/<c>[,<c>...] prefix and the hash shard of a /shards/<i>-of-<n>
	// prefix (after the clusters); the zero ViewPart on the base path.
	Part ViewPart
	// Cluster is the logical cluster of a part of exactly one cluster (Part.Cluster(), a
	// /clusters/<cluster> prefix), or "".
	Cluster ClusterName
	// Info is what kube-apiserver would derive for the same path (below the cluster prefix),
	// method and query on its own URL space: the verb (get, list, watch, update, patch, ...),
	// the group, version, resource, namespace, name and subresource.
	Info *request.RequestInfo
}

// ParseInnerRequest parses a request inside a location view. It is the one parser of inner
// requests: the view's handler, mapper-apiserver's authorizer and its long-running check all
// use it, so they always agree on what a request is.
//
// method is the HTTP method; innerPath the part of the URL below the view's base
// (".../locations/<location>/proxy"), with or without a leading "/"; rawQuery the URL's query as
// sent, without "?" (it decides list versus watch exactly as kube-apiserver does: watch=true,
// watch=1, or the legacy /watch/ path segment). It returns an error that says why for a path
// that cannot be a Kubernetes API path (".." or empty segments, an invalid cluster name or
// shard).
func ParseInnerRequest(method, innerPath, rawQuery string) (*InnerRequest, error) {
	p := "/" + strings.TrimPrefix(innerPath, "/")
	trimmed := strings.TrimSuffix(p, "/")
	if trimmed == "" {
		trimmed = "/"
	}
	if cleaned := path.Clean(trimmed); cleaned != trimmed {
		return nil, fmt.Errorf("the path %q is not a canonical API path", Truncate(innerPath, maxQuoted))
	}
	part, trimmed, err := parseViewPart(trimmed)
	if err != nil {
		return nil, err
	}
	req := &http.Request{Method: method, URL: &url.URL{Path: trimmed, RawQuery: rawQuery}}
	info, err := innerRequestInfoFactory.NewRequestInfo(req)
	if err != nil {
		return nil, err
	}
	return &InnerRequest{Part: part, Cluster: part.Cluster(), Info: info}, nil
}

// ViewOf returns the location of a request to a location view and the path below the view's
// base, given outer, the RequestInfo the generic API server derived for the request's URL. ok is
// false for any other request.
//
// The inner path is computed exactly as k8s.io/apiserver computes the sub-path of a
// rest.Connecter (handlers.getRequestOptions), which is the path the view serves: the parts
// after "proxy" joined with "/", with a leading "/" when not empty and the trailing "/" of the
// original path kept.
func ViewOf(outer *request.RequestInfo) (location, innerPath string, ok bool) {
	if outer == nil || !outer.IsResourceRequest || outer.APIGroup != GroupName || outer.Resource != LocationsResource ||
		outer.Subresource != ProxySubresource || outer.Name == "" || len(outer.Parts) < 3 {
		return "", "", false
	}
	p := strings.Join(outer.Parts[3:], "/")
	if p != "" && !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	if strings.HasSuffix(outer.Path, "/") && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return outer.Name, p, true
}

// ParseViewRequest parses req, a request whose outer RequestInfo (derived by the generic API
// server) is outer, as a request inside a location view: it returns the location and the inner
// request. ok is false when req is not a view request; err is set when it is one whose inner
// path is not a Kubernetes API path (the view answers 404).
//
// Within a request served behind [WithInnerRequestMemo], the inner request is parsed once and
// shared by every caller: the returned InnerRequest must not be modified.
func ParseViewRequest(req *http.Request, outer *request.RequestInfo) (location string, inner *InnerRequest, ok bool, err error) {
	location, innerPath, ok := ViewOf(outer)
	if !ok {
		return "", nil, false, nil
	}
	inner, err = ParseInnerRequestOf(req, innerPath)
	return location, inner, true, err
}
