package contract

import (
	"regexp"
	"strings"
)

// Names of the aggregated API and of the location view (docs/design.md, "The location view").
const (
	// GroupName is the aggregated API group that mapper-apiserver serves.
	GroupName = "mapper.kcp.io"
	// Version is the served version of GroupName.
	Version = "v1alpha1"
	// LocationsResource is the read-only resource of GroupName with one entry per location.
	LocationsResource = "locations"
	// ProxySubresource is the subresource of a location that serves its view. kube-apiserver
	// treats "proxy" subresources as long-running, so view watches through the aggregator are
	// neither cut at --request-timeout nor hold a priority-and-fairness seat.
	ProxySubresource = "proxy"
	// ClustersSegment starts the part of a view path that names one logical cluster:
	// <view>/clusters/<cluster>/...
	ClustersSegment = "clusters"
)

// groupVersionPath is the URL path of the aggregated group version.
const groupVersionPath = "/apis/" + GroupName + "/" + Version

// ViewPath returns the URL path of location's view: the all-clusters base
// /apis/mapper.kcp.io/v1alpha1/locations/<location>/proxy when cluster is "", else the base of one
// logical cluster, <all-clusters base>/clusters/<cluster>. Neither is validated.
func ViewPath(location string, cluster ClusterName) string {
	p := groupVersionPath + "/" + LocationsResource + "/" + location + "/" + ProxySubresource
	if cluster != "" {
		p += "/" + ClustersSegment + "/" + string(cluster)
	}
	return p
}

// viewPathRE matches a view base URL path behind any prefix (a proxy's, or none), ending at the
// base, with an optional trailing "/".
var viewPathRE = regexp.MustCompile(`^(.*)` + regexp.QuoteMeta(groupVersionPath+"/"+LocationsResource+"/") +
	`([^/]+)/` + ProxySubresource + `(?:/` + ClustersSegment + `/([^/]+))?/?$`)

// ViewURLPath is a parsed view base URL path (see ParseViewPath).
type ViewURLPath struct {
	// Prefix is what precedes /apis/mapper.kcp.io/... ("" when the server is at the root).
	Prefix string
	// Location is the view's location.
	Location string
	// Cluster is the logical cluster of a per-cluster base, or "" for the all-clusters base.
	Cluster ClusterName
}

// ParseViewPath parses p, the path of a URL that points at a view's base (for example the
// server of a kubeconfig). It returns ok=false when p is not a view base or names an invalid
// location or cluster.
func ParseViewPath(p string) (ViewURLPath, bool) {
	m := viewPathRE.FindStringSubmatch(p)
	if m == nil || ValidateLocationName(m[2]) != nil || (m[3] != "" && ValidateClusterName(m[3]) != nil) {
		return ViewURLPath{}, false
	}
	return ViewURLPath{Prefix: strings.TrimSuffix(m[1], "/"), Location: m[2], Cluster: ClusterName(m[3])}, true
}
