package apiserver

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestAuthenticationGate: until the delegated authentication is ready, every request but the
// health checks is answered 503 with Retry-After and a Status saying why, and never reaches the
// handler; afterwards every request does.
func TestAuthenticationGate(t *testing.T) {
	d := &delegatedAuthentication{}
	d.why.Store("the client-ca-file of kube-system/extension-apiserver-authentication has not been loaded yet")
	reached := 0
	h := d.gate(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reached++ }))
	serve := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	rec := serve("/apis/mapper.kcp.io/v1alpha1/locations/east/proxy/api/v1/configmaps")
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" || reached != 0 {
		t.Fatalf("before ready: %d, Retry-After %q, reached %d; want 503, 1, 0\n%s", rec.Code, rec.Header().Get("Retry-After"), reached, rec.Body)
	}
	for _, p := range []string{"/readyz", "/readyz/delegated-authentication-loaded", "/livez", "/healthz"} {
		if rec := serve(p); rec.Code != http.StatusOK {
			t.Errorf("before ready, %s: %d, want it served", p, rec.Code)
		}
	}
	if err := d.Check(nil); err == nil {
		t.Error("the readyz check passes before ready")
	}
	d.ready.Store(true)
	if rec := serve("/api"); rec.Code != http.StatusOK || d.Check(nil) != nil {
		t.Errorf("after ready: %d, check %v", rec.Code, d.Check(nil))
	}
}
