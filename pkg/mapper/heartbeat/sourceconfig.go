package heartbeat

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"k8s.io/client-go/rest"
)

// viewSuffix matches the path of a location view's base URL (DESIGN.md, "The location
// view"), for all logical clusters or one, at the end of a URL path.
var viewSuffix = regexp.MustCompile(`/apis/mapper\.kcp\.io/v1alpha1/locations/[^/]+/proxy(/clusters/[^/]+)?/?$`)

// SourceConfig returns the client config of the source kube-apiserver that serves a location
// view through its aggregator: view with the view path stripped from its Host (any prefix
// before it, e.g. a proxy path, is kept), and the same credentials and TLS settings. The
// mapper reaches its Lease and SyncTarget this way (issue 13: "through the same kube-apiserver
// as its view"). It returns an error when view.Host is not a view URL.
func SourceConfig(view *rest.Config) (*rest.Config, error) {
	u, err := url.Parse(view.Host)
	if err != nil {
		return nil, fmt.Errorf("the view server %q is not a URL: %w", view.Host, err)
	}
	loc := viewSuffix.FindStringIndex(u.Path)
	if loc == nil {
		return nil, fmt.Errorf("the view server %q is not a location view URL", view.Host)
	}
	u.Path = strings.TrimSuffix(u.Path[:loc[0]], "/")
	u.RawPath = ""
	cfg := rest.CopyConfig(view)
	cfg.Host = u.String()
	cfg.APIPath = ""
	return cfg, nil
}
