package authorizer

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"
)

// requestInfoFactory parses outer URLs as mapper-apiserver's generic server does.
var requestInfoFactory = &request.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

const viewBase = "/apis/mapper.kcp.io/v1alpha1/locations/east/proxy"

func parse(t *testing.T, method, target string) (*http.Request, *request.RequestInfo) {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	info, err := requestInfoFactory.NewRequestInfo(req)
	if err != nil {
		t.Fatalf("parsing %s %s: %v", method, target, err)
	}
	return req, info
}

// TestInnerVerb checks which verb a request inside a view has: the outer verb is always get for a
// GET (the outer path names the location), the inner one is what kube-apiserver derives for the
// inner path.
func TestInnerVerb(t *testing.T) {
	for _, c := range []struct {
		method, path string
		outer, inner string
		innerPath    string
	}{
		{"GET", viewBase + "/api/v1/namespaces/ns/configmaps?watch=true", "get", "watch", "/api/v1/namespaces/ns/configmaps"},
		{"GET", viewBase + "/api/v1/configmaps?watch=1&resourceVersion=5", "get", "watch", "/api/v1/configmaps"},
		{"GET", viewBase + "/api/v1/configmaps?watch=false", "get", "list", "/api/v1/configmaps"},
		{"GET", viewBase + "/api/v1/configmaps", "get", "list", "/api/v1/configmaps"},
		{"GET", viewBase + "/api/v1/watch/namespaces/ns/configmaps", "get", "watch", "/api/v1/watch/namespaces/ns/configmaps"},
		{"GET", viewBase + "/apis/apps/v1/deployments?watch=true&fieldSelector=metadata.name%3Dx", "get", "watch", "/apis/apps/v1/deployments"},
		// A named GET with ?watch=true is a GET in kube-apiserver, too.
		{"GET", viewBase + "/api/v1/namespaces/ns/configmaps/x?watch=true", "get", "get", "/api/v1/namespaces/ns/configmaps/x"},
		{"GET", viewBase + "/api", "get", "get", "/api"},
		{"GET", viewBase + "/apis/", "get", "get", "/apis/"},
		{"GET", viewBase, "get", "get", ""},
		{"PUT", viewBase + "/apis/apps/v1/namespaces/ns/deployments/x/status", "update", "update", "/apis/apps/v1/namespaces/ns/deployments/x/status"},
		{"PATCH", viewBase + "/apis/apps/v1/namespaces/ns/deployments/x/status", "patch", "patch", "/apis/apps/v1/namespaces/ns/deployments/x/status"},
		{"POST", viewBase + "/api/v1/namespaces/ns/configmaps", "create", "create", "/api/v1/namespaces/ns/configmaps"},
		{"DELETE", viewBase + "/api/v1/namespaces/ns/configmaps", "delete", "deletecollection", "/api/v1/namespaces/ns/configmaps"},
		// Not an API path: the view answers 404, no inner verb.
		{"GET", viewBase + "/api/v1/namespaces/ns/../configmaps?watch=true", "get", "", ""},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			req, info := parse(t, c.method, c.path)
			_, innerPath, ok := contract.ViewOf(info)
			if !ok {
				t.Fatalf("not a view request: %+v", info)
			}
			if info.Verb != c.outer || info.Name != "east" || info.Subresource != contract.ProxySubresource {
				t.Errorf("outer: verb %q name %q subresource %q, want %q east view", info.Verb, info.Name, info.Subresource, c.outer)
			}
			if c.innerPath != "" || c.inner != "" {
				if got := innerPath; got != c.innerPath {
					t.Errorf("InnerPath = %q, want %q", got, c.innerPath)
				}
			}
			if got := innerVerb(req, info); got != c.inner {
				t.Errorf("innerVerb = %q, want %q", got, c.inner)
			}
		})
	}
	for _, p := range []string{"/apis/mapper.kcp.io/v1alpha1/locations", "/apis/mapper.kcp.io/v1alpha1/locations/east", "/apis/apps/v1/deployments", "/healthz"} {
		if _, info := parse(t, "GET", p); isView(info) {
			t.Errorf("%s taken for a view request", p)
		}
	}
}

// isView reports whether info is the outer RequestInfo of a request to a location view.
func isView(info *request.RequestInfo) bool {
	_, _, ok := contract.ViewOf(info)
	return ok
}

// rbac is a stand-in for the delegated authorizer: it allows the (user, verb, location) triples
// it holds for locations/proxy, and list/get of locations for users in locationReaders. It counts
// what it is asked.
type rbac struct {
	mu              sync.Mutex
	grants          sets.Set[string] // "user/verb/location"
	locationReaders sets.Set[string]
	asked           []string
}

func (r *rbac) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, fmt.Sprintf("%s/%s/%s/%s", a.GetUser().GetName(), a.GetVerb(), a.GetResource()+"/"+a.GetSubresource(), a.GetName()))
	if loc, ok := ViewLocation(a); ok && r.grants.Has(a.GetUser().GetName()+"/"+a.GetVerb()+"/"+loc) {
		return authorizer.DecisionAllow, "", nil
	}
	if a.GetResource() == "locations" && a.GetSubresource() == "" && r.locationReaders.Has(a.GetUser().GetName()) {
		return authorizer.DecisionAllow, "", nil
	}
	if !a.IsResourceRequest() && a.GetPath() == "/healthz" {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func newScheme() runtime.NegotiatedSerializer {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(scheme).WithoutConversion()
}

// serve runs req as u through the generic authorization filter with New(delegate) and then
// WithViewWatchAuthorization, in the order Install puts them, and returns the response and
// whether the request reached the API handler.
func serve(t *testing.T, delegate authorizer.Authorizer, u user.Info, method, target string) (*httptest.ResponseRecorder, bool) {
	t.Helper()
	s := newScheme()
	a := New(delegate)
	reached := false
	api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reached = true })
	h := genericapifilters.WithAuthorization(WithViewWatchAuthorization(api, a, s), a, s)
	req, info := parse(t, method, target)
	ctx := request.WithRequestInfo(req.Context(), info)
	if u != nil {
		ctx = request.WithUser(ctx, u)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req.WithContext(ctx))
	return rec, reached
}

func decodeStatus(t *testing.T, rec *httptest.ResponseRecorder) metav1.Status {
	t.Helper()
	var s metav1.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
		t.Fatalf("the %d answer is not a Status: %v\n%s", rec.Code, err, rec.Body)
	}
	return s
}

func TestAuthorization(t *testing.T) {
	r := &rbac{
		grants: sets.New("mapper/get/east", "mapper/watch/east", "mapper/update/east", "mapper/patch/east",
			"reader/get/east", "watcher/watch/east"),
		locationReaders: sets.New("mapper"),
	}
	usr := func(name string, groups ...string) user.Info { return &user.DefaultInfo{Name: name, Groups: groups} }
	watch := viewBase + "/api/v1/namespaces/ns/configmaps?watch=true"
	list := viewBase + "/api/v1/namespaces/ns/configmaps"
	for _, c := range []struct {
		name    string
		u       user.Info
		method  string
		target  string
		code    int
		message []string // substrings of the Status message
	}{
		{"list with get", usr("mapper"), "GET", list, http.StatusOK, nil},
		{"watch with get and watch", usr("mapper"), "GET", watch, http.StatusOK, nil},
		{"status update", usr("mapper"), "PUT", viewBase + "/apis/apps/v1/namespaces/ns/deployments/d/status", http.StatusOK, nil},
		{"list with get only", usr("reader"), "GET", list, http.StatusOK, nil},
		{"watch with get only", usr("reader"), "GET", watch, http.StatusForbidden,
			[]string{`locations.mapper.kcp.io "east" is forbidden`, `User "reader" cannot watch resource "locations/proxy"`, `resourceNames ["east"], verbs ["watch"]`}},
		{"legacy watch path with get only", usr("reader"), "GET", viewBase + "/api/v1/watch/configmaps", http.StatusForbidden, []string{"cannot watch"}},
		{"list with watch only", usr("watcher"), "GET", list, http.StatusForbidden, []string{`cannot get resource "locations/proxy"`, `verbs ["get"]`}},
		{"watch with watch only", usr("watcher"), "GET", watch, http.StatusForbidden, []string{`cannot get resource "locations/proxy"`}},
		{"other location", usr("mapper"), "GET", "/apis/mapper.kcp.io/v1alpha1/locations/west/proxy/api/v1/configmaps", http.StatusForbidden,
			[]string{`locations.mapper.kcp.io "west" is forbidden`, `access to the view of location "west" with verb "get"`, `resourceNames ["west"]`}},
		{"status update with get only", usr("reader"), "PUT", viewBase + "/apis/apps/v1/namespaces/ns/deployments/d/status", http.StatusForbidden, []string{"cannot update", `verbs ["update"]`}},
		{"locations", usr("mapper"), "GET", "/apis/mapper.kcp.io/v1alpha1/locations", http.StatusOK, nil},
		{"locations without a grant", usr("reader"), "GET", "/apis/mapper.kcp.io/v1alpha1/locations", http.StatusForbidden, []string{"cannot list"}},
		{"anonymous view", usr(user.Anonymous, user.AllUnauthenticated), "GET", list, http.StatusForbidden, []string{"anonymous requests may not"}},
		{"anonymous group discovery", usr(user.Anonymous, user.AllUnauthenticated), "GET", "/apis/mapper.kcp.io/v1alpha1", http.StatusForbidden, []string{"anonymous requests may not"}},
		{"unauthenticated group member", usr("someone", user.AllUnauthenticated), "GET", "/apis/mapper.kcp.io", http.StatusForbidden, []string{"anonymous requests may not"}},
		{"anonymous health", usr(user.Anonymous, user.AllUnauthenticated), "GET", "/healthz", http.StatusOK, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec, reached := serve(t, r, c.u, c.method, c.target)
			if rec.Code != c.code || reached != (c.code == http.StatusOK) {
				t.Fatalf("code %d (handler reached: %v), want %d\n%s", rec.Code, reached, c.code, rec.Body)
			}
			if c.code == http.StatusOK {
				return
			}
			st := decodeStatus(t, rec)
			if st.Reason != metav1.StatusReasonForbidden || st.Code != http.StatusForbidden {
				t.Errorf("Status reason %q code %d, want Forbidden 403", st.Reason, st.Code)
			}
			if _, info := parse(t, c.method, c.target); isView(info) {
				if st.Details == nil || st.Details.Name != info.Name || st.Details.Group != "mapper.kcp.io" || st.Details.Kind != "locations" {
					t.Errorf("Status details %+v do not name locations.mapper.kcp.io %q", st.Details, info.Name)
				}
			}
			for _, m := range c.message {
				if !strings.Contains(st.Message, m) {
					t.Errorf("message %q lacks %q", st.Message, m)
				}
			}
		})
	}

	// Anonymous requests to the group are refused before the delegated authorizer is asked.
	r.asked = nil
	serve(t, r, usr(user.Anonymous, user.AllUnauthenticated), "GET", list)
	if len(r.asked) != 0 {
		t.Errorf("the delegated authorizer was asked about an anonymous view request: %v", r.asked)
	}
	// A watch asks about get (the outer request) and watch (the inner one), nothing else.
	r.asked = nil
	serve(t, r, usr("mapper"), "GET", watch)
	if want := []string{"mapper/get/locations/proxy/east", "mapper/watch/locations/proxy/east"}; strings.Join(r.asked, ",") != strings.Join(want, ",") {
		t.Errorf("asked %v, want %v", r.asked, want)
	}
}

// TestInstall checks that Install wraps the configured authorizer and the handler chain, and
// leaves a configuration without authorizer alone.
func TestInstall(t *testing.T) {
	c := &genericapiserver.Config{Serializer: newScheme()}
	Install(c)
	if c.Authorization.Authorizer != nil || c.BuildHandlerChainFunc != nil {
		t.Errorf("Install changed a configuration without authorizer")
	}
	r := &rbac{grants: sets.New("reader/get/east"), locationReaders: sets.New[string]()}
	c.Authorization.Authorizer = r
	var built bool
	c.BuildHandlerChainFunc = func(h http.Handler, _ *genericapiserver.Config) http.Handler {
		built = true
		return h
	}
	Install(c)
	if _, ok := c.Authorization.Authorizer.(*locationAuthorizer); !ok {
		t.Fatalf("the authorizer is %T, want the location authorizer", c.Authorization.Authorizer)
	}
	reached := false
	h := c.BuildHandlerChainFunc(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }), c)
	if !built {
		t.Error("Install dropped the configured BuildHandlerChainFunc")
	}
	// The previous chain here does no authorization of its own, so only the watch check runs.
	req, info := parse(t, "GET", viewBase+"/api/v1/configmaps?watch=true")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req.WithContext(request.WithUser(request.WithRequestInfo(req.Context(), info), &user.DefaultInfo{Name: "reader"})))
	if reached || rec.Code != http.StatusForbidden {
		t.Errorf("a watch by a user without watch went through the installed chain: %d %s", rec.Code, rec.Body)
	}
}

// TestMissingPermission checks the reason of a denied view request.
func TestMissingPermission(t *testing.T) {
	got := missingPermission("east", "get", "RBAC: no rule")
	for _, want := range []string{`location "east"`, `verb "get"`, `apiGroups ["mapper.kcp.io"]`, `resources ["locations/proxy"]`, `resourceNames ["east"]`, `verbs ["get"]`, "RBAC: no rule"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}
