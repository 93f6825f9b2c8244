package heartbeat

import (
	"fmt"
	"net/url"

	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// SourceConfig returns the client config of the source kube-apiserver that serves a location
// view through its aggregator: view with the view path (contract.ParseViewPath) stripped from
// its Host (any prefix before it, e.g. a proxy path, is kept), and the same credentials and TLS settings. The
// mapper reaches its Lease and SyncTarget this way ("through the same kube-apiserver
// as its view"). It returns an error when view.Host is not a view URL.
func SourceConfig(view *rest.Config) (*rest.Config, error) {
	u, err := url.Parse(view.Host)
	if err != nil {
		return nil, fmt.Errorf("the view server %q is not a URL: %w", view.Host, err)
	}
	p, ok := contract.ParseViewPath(u.Path)
	if !ok {
		return nil, fmt.Errorf("the view server %q is not a location view URL", view.Host)
	}
	u.Path = p.Prefix
	u.RawPath = ""
	cfg := rest.CopyConfig(view)
	cfg.Host = u.String()
	cfg.APIPath = ""
	return cfg, nil
}
