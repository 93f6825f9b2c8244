package sourcecluster

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// ClusterPlaceholder is replaced by the logical cluster's name in --source-cluster-path.
const ClusterPlaceholder = "{cluster}"

// DefaultClusterPath is kcp's path of one logical cluster.
const DefaultClusterPath = "/" + contract.ClustersSegment + "/" + ClusterPlaceholder

// wildcardSuffix ends the server URL of kcp's wildcard endpoint.
const wildcardSuffix = "/" + contract.ClustersSegment + "/*"

// PathClients builds and keeps the dynamic clients of one server under several URL paths (a
// logical cluster's, a location view's, a logical cluster of a view), building each on first
// use. All share one HTTP client (connections, TLS); only the URL differs. Safe for concurrent
// use.
type PathClients struct {
	base       *rest.Config
	httpClient *http.Client

	mu      sync.Mutex
	clients map[string]dynamic.Interface
}

// NewPathClients returns the clients of cfg's server: For(path) is cfg with path appended to
// its server URL. The error is rest.HTTPClientFor's.
func NewPathClients(cfg *rest.Config) (*PathClients, error) {
	base := rest.CopyConfig(cfg)
	base.Host = strings.TrimSuffix(base.Host, "/")
	hc, err := rest.HTTPClientFor(base)
	if err != nil {
		return nil, err
	}
	return &PathClients{base: base, httpClient: hc, clients: map[string]dynamic.Interface{}}, nil
}

// For returns the client of the server URL followed by path (starting with "/"), building it on
// first use.
func (c *PathClients) For(path string) (dynamic.Interface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.clients[path]; ok {
		return d, nil
	}
	cfg := rest.CopyConfig(c.base)
	cfg.Host += path
	d, err := dynamic.NewForConfigAndClient(cfg, c.httpClient)
	if err != nil {
		return nil, err
	}
	c.clients[path] = d
	return d, nil
}

// ClusterClients builds and keeps the dynamic clients of a kcp source's logical clusters
// (source.Config.ClusterDynamic is its For), as PathClients of the source's server. Safe for
// concurrent use.
type ClusterClients struct {
	paths      *PathClients // of the source's server with the /clusters/* suffix removed
	pathFormat string       // --source-cluster-path
}

// NewClusterClients returns the factory of per-cluster clients of the source whose (wildcard)
// config is cfg. pathTemplate must contain ClusterPlaceholder (else an error naming
// --source-cluster-path); an error is also returned when cfg.Host is not a URL. The server URL of cfg may end
// with /clusters/* (kcp's wildcard endpoint); that suffix is replaced by the cluster's path, so
// with the default template a server https://kcp:6443/clusters/* writes cluster c at
// https://kcp:6443/clusters/c.
func NewClusterClients(cfg *rest.Config, pathTemplate string) (*ClusterClients, error) {
	if !strings.Contains(pathTemplate, ClusterPlaceholder) {
		return nil, fmt.Errorf("--source-cluster-path %q must contain %s", pathTemplate, ClusterPlaceholder)
	}
	base, err := WithoutWildcard(cfg)
	if err != nil {
		return nil, err
	}
	paths, err := NewPathClients(base)
	if err != nil {
		return nil, err
	}
	return &ClusterClients{paths: paths, pathFormat: pathTemplate}, nil
}

// WithoutWildcard returns a copy of cfg whose server URL has no trailing /clusters/* (kcp's
// wildcard endpoint): the root of the server. An error is returned when cfg.Host is not a URL.
func WithoutWildcard(cfg *rest.Config) (*rest.Config, error) {
	base := rest.CopyConfig(cfg)
	u, err := url.Parse(base.Host)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("the source server %q is not a URL", base.Host)
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), wildcardSuffix)
	base.Host = u.String()
	return base, nil
}

// For returns the client of cluster, building it on first use. cluster must be a valid logical
// cluster name (the cache only stores objects whose cluster is); otherwise For returns
// contract.ValidateClusterName's error.
func (c *ClusterClients) For(cluster string) (dynamic.Interface, error) {
	if err := contract.ValidateClusterName(cluster); err != nil {
		return nil, err
	}
	return c.paths.For(strings.ReplaceAll(c.pathFormat, ClusterPlaceholder, cluster))
}
