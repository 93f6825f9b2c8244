package contract

import (
	"context"
	"net/http"
	"sync"
)

// A view request is parsed by several parts of mapper-apiserver: the generic API server's
// long-running check (called by the priority-and-fairness, audit, timeout, deadline and
// wait-group filters), the authorizer's watch check and the view's handler. Each parse builds a
// RequestInfo with kube-apiserver's parser, whose list options are decoded by reflection; seven
// parses were 5% of the CPU of a view LIST. The memo lets the first parse serve the others.

// innerRequestMemoKey is the context key of the request's innerRequestMemo.
type innerRequestMemoKey struct{}

// innerRequestMemo holds the inner request parsed for one HTTP request, with what it was parsed
// from: a lookup for another method, path or query (a request the handler chain rewrote) parses
// anew.
type innerRequestMemo struct {
	mu                          sync.Mutex
	parsed                      bool
	method, innerPath, rawQuery string
	inner                       *InnerRequest
	err                         error
}

// WithInnerRequestMemo returns handler with a memo of the inner request in each request's
// context, which [ParseViewRequest] and [ParseInnerRequestOf] fill on their first call and read
// on the others. Install it outside every filter that parses view requests (mapper-apiserver
// wraps the whole handler chain with it).
func WithInnerRequestMemo(handler http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx := context.WithValue(req.Context(), innerRequestMemoKey{}, &innerRequestMemo{})
		handler.ServeHTTP(w, req.WithContext(ctx))
	})
}

// ParseInnerRequestOf returns ParseInnerRequest(req.Method, innerPath, req.URL.RawQuery),
// parsed at most once per request behind [WithInnerRequestMemo] (the result is shared: do not
// modify it).
func ParseInnerRequestOf(req *http.Request, innerPath string) (*InnerRequest, error) {
	m, _ := req.Context().Value(innerRequestMemoKey{}).(*innerRequestMemo)
	if m == nil {
		return ParseInnerRequest(req.Method, innerPath, req.URL.RawQuery)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.parsed {
		if m.method == req.Method && m.innerPath == innerPath && m.rawQuery == req.URL.RawQuery {
			return m.inner, m.err
		}
		return ParseInnerRequest(req.Method, innerPath, req.URL.RawQuery)
	}
	m.inner, m.err = ParseInnerRequest(req.Method, innerPath, req.URL.RawQuery)
	m.parsed, m.method, m.innerPath, m.rawQuery = true, req.Method, innerPath, req.URL.RawQuery
	return m.inner, m.err
}
