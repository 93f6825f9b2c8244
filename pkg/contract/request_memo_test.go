package contract

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// outerInfo returns the RequestInfo the generic API server derives for req's outer URL.
func outerInfo(t *testing.T, req *http.Request) *request.RequestInfo {
	t.Helper()
	f := &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}
	info, err := f.NewRequestInfo(req)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// TestInnerRequestMemo checks that behind WithInnerRequestMemo every parse of one request's view
// request after the first returns the first one's result, that a different inner path is parsed
// anew, and that without the memo each call parses.
func TestInnerRequestMemo(t *testing.T) {
	target := ViewPath("east", "") + "/api/v1/configmaps?watch=true&resourceVersion=5"
	var first, second, other *InnerRequest
	handler := WithInnerRequestMemo(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		outer := outerInfo(t, req)
		loc, inner, ok, err := ParseViewRequest(req, outer)
		if !ok || err != nil || loc != "east" {
			t.Fatalf("ParseViewRequest: location %q, ok %v, err %v", loc, ok, err)
		}
		first = inner
		// A filter further in copies the request with its own context, as the generic filters do.
		req = req.WithContext(request.WithRequestInfo(req.Context(), outer))
		_, second, _, _ = ParseViewRequest(req, outer)
		other, err = ParseInnerRequestOf(req, "/api/v1/namespaces/ns/configmaps/cm")
		if err != nil {
			t.Fatal(err)
		}
	}))
	handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", target, nil))
	if first == nil || first.Info.Verb != "watch" || first.Info.Resource != "configmaps" {
		t.Fatalf("first parse: %+v", first)
	}
	if second != first {
		t.Errorf("the second parse of the same request returned a new result: the memo was not used")
	}
	if other == first || other.Info.Verb != "get" || other.Info.Name != "cm" {
		t.Errorf("a different inner path returned %+v, want its own parse (get of cm)", other.Info)
	}

	req := httptest.NewRequest("GET", target, nil)
	outer := outerInfo(t, req)
	_, a, _, _ := ParseViewRequest(req, outer)
	_, b, _, _ := ParseViewRequest(req, outer)
	if a == b || a.Info.Verb != "watch" || b.Info.Verb != "watch" {
		t.Errorf("without the memo: %p %+v and %p %+v, want two parses of a watch", a, a.Info, b, b.Info)
	}
}
