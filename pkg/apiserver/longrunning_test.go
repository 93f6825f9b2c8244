package apiserver

import (
	"net/http/httptest"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// TestLongRunningReadsTheInnerRequest checks that the long-running decision for a view request
// follows the request inside the view: only a real watch is long-running,
// however it is written, and a GET or a status write with ?watch=true in the outer query is not.
func TestLongRunningReadsTheInnerRequest(t *testing.T) {
	factory := &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}
	base := contract.ViewPath("east", "")
	for _, c := range []struct {
		method, target string
		want           bool
	}{
		{"GET", base + "/api/v1/configmaps?watch=true", true},
		{"GET", base + "/api/v1/configmaps?watch=1", true},
		{"GET", base + "/api/v1/watch/configmaps", true},
		{"GET", base + "/api/v1/watch/namespaces/ns/configmaps/cm", true},
		{"GET", base + "/clusters/c1/api/v1/configmaps?watch=true", true},
		{"GET", base + "/api/v1/configmaps", false},
		{"GET", base + "/api/v1/configmaps?watch=false", false},
		{"GET", base + "/api/v1/namespaces/ns/configmaps/cm?watch=true", false},
		{"PUT", base + "/api/v1/namespaces/ns/configmaps/cm/status?watch=true", false},
		{"GET", base + "/api?watch=true", false},
		{"GET", base + "/api/v1/namespaces/ns/../configmaps?watch=true", false},
		// Outside views, k8s.io/apiserver's own rule.
		{"GET", "/apis/mapper.kcp.io/v1alpha1/locations?watch=true", true},
		{"GET", "/apis/mapper.kcp.io/v1alpha1/locations", false},
	} {
		req := httptest.NewRequest(c.method, c.target, nil)
		info, err := factory.NewRequestInfo(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.target, err)
		}
		if got := longRunning(req, info); got != c.want {
			t.Errorf("%s %s: long-running = %v, want %v", c.method, c.target, got, c.want)
		}
	}
}
