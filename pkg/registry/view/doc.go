// Package view serves a location view: below
// /apis/mapper.kcp.io/v1alpha1/locations/<location>/proxy, an ordinary-looking Kubernetes API
// (discovery, get, list, watch, Table output) that holds only the objects assigned to that
// location (docs/design.md, "The location view").
//
// The view is the `locations/proxy` subresource, implemented as a rest.Connecter with a sub-path
// (the same pattern as pods/proxy), so the generic API server's own filters authenticate and
// authorize the outer request. Inside, each request is parsed into its own RequestInfo and
// handed to k8s.io/apiserver's endpoint handlers (handlers.GetResource, handlers.ListResource)
// with one RequestScope per mirrored resource, exactly as apiextensions-apiserver serves custom
// resources. Objects come straight from pkg/cache: every object version is encoded once and
// the bytes are reused for every list response and watch event that carries it.
package view
