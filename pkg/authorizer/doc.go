// Package authorizer is mapper-apiserver's per-location authorization (docs/design.md,
// "Authorization").
//
// A request to a location view,
//
//	/apis/mapper.kcp.io/v1alpha1/locations/<location>/proxy/<path...>
//
// is authorized as the subresource "locations/proxy" of API group "mapper.kcp.io", with the
// location as resource name. Every decision is made by the server's delegated authorizer (built
// by k8s.io/apiserver's DelegatingAuthorizationOptions: system:masters and the health paths are
// allowed locally, everything else is a SubjectAccessReview to the core kube-apiserver, whose
// answers the webhook authorizer caches with the --authorization-webhook-cache-authorized-ttl /
// --authorization-webhook-cache-unauthorized-ttl TTLs in one LRU cache of 8192 entries shared by
// all requests). This package adds no cache and no SubjectAccessReview client of its own.
//
// # Which verbs are checked
//
// The outer request is authorized with the attributes kube-apiserver derives for the same path,
// so that the kube-apiserver aggregator (which checks the request before proxying it) and
// mapper-apiserver check the same thing:
//
//   - any read inside the view (GET of discovery, of an object, a list, a watch) is the verb
//     "get" of locations/proxy, because the outer path names the location;
//   - a status write is "update" (PUT) or "patch" (PATCH); any other write is the verb of its
//     HTTP method ("create", "delete"), which the view accepts for the location's related
//     copies only (docs/views.md, "Related copies").
//
// The aggregator cannot tell a watch from a read, but mapper-apiserver can: for a request whose
// inner path and query make it a watch (as kube-apiserver would derive for the inner path:
// ?watch=true on a collection, or the legacy /watch/ prefix), [WithViewWatchAuthorization] also
// requires the verb "watch". A watch therefore needs both "get" and "watch", whichever way it
// arrives: a user with only "get" can read but not watch, and a user with only "watch" can do
// nothing, both through the aggregator and directly. The rule of docs/design.md (verbs get, watch,
// update, patch, create, delete) grants everything a mapper needs on both paths.
//
// # Anonymous requests
//
// The delegating authenticator always admits anonymous requests (the kubelet probes /healthz,
// /livez and /readyz without credentials). [New] denies anonymous users (system:anonymous or
// group system:unauthenticated) every request to the mapper.kcp.io group, resource or not,
// whatever RBAC grants them; other paths are left to the delegated authorizer.
//
// # Denials
//
// A denied request to a view gets the usual 403 Status of the generic API server
// (reason Forbidden, details naming locations.mapper.kcp.io and the location), whose message
// names the user, the verb and locations/proxy, and adds which RBAC rule would grant the access.
package authorizer
