package authorizer

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// groupPathPrefix is the URL prefix of every path of the mapper.kcp.io group.
const groupPathPrefix = "/apis/" + mapper.GroupName

// New returns mapper-apiserver's authorizer on top of delegate, the server's delegated
// authorizer (see the package documentation). It
//
//   - denies anonymous users (system:anonymous, or anyone in system:unauthenticated) every
//     request to the mapper.kcp.io group, resource requests and non-resource paths such as
//     discovery alike, before delegate is asked;
//   - asks delegate about everything else, unchanged;
//   - when delegate does not allow a request to a location view, returns a reason naming the
//     location, the verb and the RBAC rule that would grant it (the generic API server appends
//     the reason to its 403 message).
//
// delegate must not be nil.
func New(delegate authorizer.Authorizer) authorizer.Authorizer {
	return &locationAuthorizer{delegate: delegate}
}

type locationAuthorizer struct {
	delegate authorizer.Authorizer
}

// Authorize implements authorizer.Authorizer.
func (a *locationAuthorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if isAnonymous(attrs.GetUser()) && inGroup(attrs) {
		return authorizer.DecisionDeny, "anonymous requests may not read locations or location views; " +
			"authenticate with a client certificate or a bearer token, or go through the kube-apiserver aggregator", nil
	}
	decision, reason, err := a.delegate.Authorize(ctx, attrs)
	if decision == authorizer.DecisionAllow {
		return decision, reason, err
	}
	if location, ok := ViewLocation(attrs); ok {
		reason = missingPermission(location, attrs.GetVerb(), reason)
	}
	return decision, reason, err
}

// ViewLocation returns the location whose view attrs are for, and whether they are: a resource
// request of group mapper.kcp.io for the subresource locations/proxy of a named location.
func ViewLocation(attrs authorizer.Attributes) (string, bool) {
	if !attrs.IsResourceRequest() || attrs.GetAPIGroup() != mapper.GroupName ||
		attrs.GetResource() != contract.LocationsResource || attrs.GetSubresource() != contract.ProxySubresource || attrs.GetName() == "" {
		return "", false
	}
	return attrs.GetName(), true
}

// innerVerb returns the verb of the request inside a view (contract.ParseViewRequest), or ""
// when req is not a view request or its inner path is not a Kubernetes API path (the view
// answers 404).
func innerVerb(req *http.Request, outer *request.RequestInfo) string {
	_, inner, ok, err := contract.ParseViewRequest(req, outer)
	if !ok || err != nil {
		return ""
	}
	return inner.Info.Verb
}

// isAnonymous reports whether u is an unauthenticated user: kube-apiserver's anonymous
// authenticator gives the name system:anonymous and the group system:unauthenticated.
func isAnonymous(u user.Info) bool {
	if u == nil {
		return true
	}
	return u.GetName() == user.Anonymous || sets.New(u.GetGroups()...).Has(user.AllUnauthenticated)
}

// inGroup reports whether attrs are for the mapper.kcp.io group: a resource request of the group,
// or a non-resource request below /apis/mapper.kcp.io (its discovery).
func inGroup(attrs authorizer.Attributes) bool {
	if attrs.IsResourceRequest() {
		return attrs.GetAPIGroup() == mapper.GroupName
	}
	p := attrs.GetPath()
	return p == groupPathPrefix || strings.HasPrefix(p, groupPathPrefix+"/")
}

// missingPermission is the reason of a denied view request: which rule grants verb on the view of
// location. delegateReason, the delegated authorizer's own reason, is kept when not empty.
func missingPermission(location, verb, delegateReason string) string {
	msg := fmt.Sprintf("access to the view of location %q with verb %q needs an RBAC rule with "+
		"apiGroups [%q], resources [%q], resourceNames [%q], verbs [%q]",
		location, verb, mapper.GroupName, contract.LocationsResource+"/"+contract.ProxySubresource, location, verb)
	if verb == "watch" {
		msg += ` (a watch needs "get" as well, which the kube-apiserver aggregator checks)`
	}
	if delegateReason != "" {
		msg += "; " + delegateReason
	}
	return msg
}
