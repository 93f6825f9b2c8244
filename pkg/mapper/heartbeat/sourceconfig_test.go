package heartbeat

import (
	"testing"

	"k8s.io/client-go/rest"
)

func TestSourceConfig(t *testing.T) {
	for _, tc := range []struct{ view, want string }{
		{"https://kas:6443/apis/mapper.kcp.io/v1alpha1/locations/east/proxy", "https://kas:6443"},
		{"https://kas:6443/apis/mapper.kcp.io/v1alpha1/locations/east/proxy/", "https://kas:6443"},
		{"https://kas:6443/apis/mapper.kcp.io/v1alpha1/locations/east/proxy/clusters/root", "https://kas:6443"},
		{"https://lb/k8s/apis/mapper.kcp.io/v1alpha1/locations/west/proxy", "https://lb/k8s"},
	} {
		cfg, err := SourceConfig(&rest.Config{Host: tc.view, BearerToken: "t"})
		if err != nil {
			t.Fatalf("%s: %v", tc.view, err)
		}
		if cfg.Host != tc.want || cfg.BearerToken != "t" {
			t.Errorf("%s: got host %q token %q, want %q and the view's credentials", tc.view, cfg.Host, cfg.BearerToken, tc.want)
		}
	}
	for _, bad := range []string{"https://kas:6443", "https://kas/apis/mapper.kcp.io/v1alpha1/locations/east", "://x"} {
		if _, err := SourceConfig(&rest.Config{Host: bad}); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
