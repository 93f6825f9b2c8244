package authorizer

import (
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/klog/v2"
)

// Audit annotations of the watch check; the generic authorization filter has written
// authorization.k8s.io/decision and /reason for the outer "get" already.
const (
	watchDecisionAnnotation = "authorization.mapper.kcp.io/watch-decision"
	watchReasonAnnotation   = "authorization.mapper.kcp.io/watch-reason"
)

// Install makes the generic API server configuration c authorize requests as docs/design.md
// ("Authorization") says. Call it after the options have been applied to c (ApplyTo), which
// sets c.Authorization.Authorizer to the delegated authorizer:
//
//   - c.Authorization.Authorizer becomes [New] of it (anonymous denial, reasons naming the
//     location and the missing permission);
//   - c.BuildHandlerChainFunc (default: genericapiserver.DefaultBuildHandlerChain) gets
//     [WithViewWatchAuthorization] around the API handler, that is after the generic
//     authentication, impersonation and authorization filters.
//
// When c has no authorizer (authorization disabled), c is left unchanged.
func Install(c *genericapiserver.Config) {
	if c.Authorization.Authorizer == nil {
		return
	}
	c.Authorization.Authorizer = New(c.Authorization.Authorizer)
	build := c.BuildHandlerChainFunc
	if build == nil {
		build = genericapiserver.DefaultBuildHandlerChain
	}
	c.BuildHandlerChainFunc = func(apiHandler http.Handler, cfg *genericapiserver.Config) http.Handler {
		return build(WithViewWatchAuthorization(apiHandler, cfg.Authorization.Authorizer, cfg.Serializer), cfg)
	}
}

// WithViewWatchAuthorization requires the verb "watch" of locations/proxy for watches inside a
// location view, on top of the "get" the generic authorization filter checked for the outer
// request (see the package documentation). It must run after that filter: it reads the user and
// the RequestInfo from the request context. A request that is not a watch inside a view passes
// unchanged.
//
// When a does not allow the watch, the client gets 403 with the Status the generic filter would
// write for the verb "watch" (reason Forbidden, details locations.mapper.kcp.io/<location>), and
// the audit event gets the annotations authorization.mapper.kcp.io/watch-decision and
// watch-reason. An authorizer error without a decision is a 500, as in the generic filter.
func WithViewWatchAuthorization(handler http.Handler, a authorizer.Authorizer, s runtime.NegotiatedSerializer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx := req.Context()
		info, ok := request.RequestInfoFrom(ctx)
		if !ok || info.Verb != "get" || innerVerb(req, info) != "watch" {
			handler.ServeHTTP(w, req)
			return
		}
		outer, err := genericapifilters.GetAuthorizerAttributes(ctx)
		if err != nil {
			responsewriters.InternalError(w, req, err)
			return
		}
		attrs := withVerb(outer, "watch")
		decision, reason, err := a.Authorize(ctx, attrs)
		if decision == authorizer.DecisionAllow {
			audit.AddAuditAnnotations(ctx, watchDecisionAnnotation, "allow", watchReasonAnnotation, reason)
			handler.ServeHTTP(w, req)
			return
		}
		if err != nil {
			audit.AddAuditAnnotation(ctx, watchReasonAnnotation, "internal error")
			responsewriters.InternalError(w, req, err)
			return
		}
		klog.FromContext(ctx).V(4).Info("Forbidden watch in a location view", "URI", req.RequestURI, "reason", reason)
		audit.AddAuditAnnotations(ctx, watchDecisionAnnotation, "forbid", watchReasonAnnotation, reason)
		responsewriters.Forbidden(attrs, w, req, reason, s)
	})
}

// withVerb returns a copy of attrs with verb instead of attrs' verb.
func withVerb(attrs authorizer.Attributes, verb string) authorizer.Attributes {
	if rec, ok := attrs.(*authorizer.AttributesRecord); ok {
		c := *rec
		c.Verb = verb
		return &c
	}
	return &authorizer.AttributesRecord{
		User:            attrs.GetUser(),
		Verb:            verb,
		Namespace:       attrs.GetNamespace(),
		APIGroup:        attrs.GetAPIGroup(),
		APIVersion:      attrs.GetAPIVersion(),
		Resource:        attrs.GetResource(),
		Subresource:     attrs.GetSubresource(),
		Name:            attrs.GetName(),
		ResourceRequest: attrs.IsResourceRequest(),
		Path:            attrs.GetPath(),
	}
}
