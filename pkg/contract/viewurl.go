package contract

import "strings"

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

// ViewPartPath returns the URL path of part of location's view: the all-clusters base
// followed by part.Path() (ViewPath(location, "") for the whole location). Neither is
// validated.
func ViewPartPath(location string, part ViewPart) string {
	return ViewPath(location, "") + part.Path()
}

// viewBasePathPrefix precedes the location in a view's base path.
const viewBasePathPrefix = groupVersionPath + "/" + LocationsResource + "/"

// ViewURLPath is a parsed view base URL path (see ParseViewPath).
type ViewURLPath struct {
	// Prefix is what precedes /apis/mapper.kcp.io/... ("" when the server is at the root).
	Prefix string
	// Location is the view's location.
	Location string
	// Part is the part of the location the URL selects (the zero ViewPart for the
	// all-clusters base).
	Part ViewPart
	// Cluster is the logical cluster of a per-cluster base (Part.Cluster()), or "".
	Cluster ClusterName
}

// ParseViewPath parses p, the path of a URL that points at a view's base or at a part of it
// (for example the server of a kubeconfig): behind any prefix (a proxy's, or none),
// /apis/mapper.kcp.io/v1alpha1/locations/<location>/proxy, then optionally a part
// (ViewPart.Path), with an optional trailing "/". It returns ok=false when p is not such a path
// or names an invalid location, cluster or shard.
func ParseViewPath(p string) (ViewURLPath, bool) {
	i := strings.LastIndex(p, viewBasePathPrefix)
	if i < 0 {
		return ViewURLPath{}, false
	}
	prefix, rest := p[:i], p[i+len(viewBasePathPrefix):]
	location, rest, ok := strings.Cut(rest, "/"+ProxySubresource)
	if !ok || ValidateLocationName(location) != nil {
		return ViewURLPath{}, false
	}
	rest = strings.TrimSuffix(rest, "/")
	if rest != "" && !strings.HasPrefix(rest, "/") {
		return ViewURLPath{}, false // e.g. .../proxyfoo
	}
	part, below, err := parseViewPart(rest + "/")
	if err != nil || below != "/" {
		return ViewURLPath{}, false // not a part path
	}
	return ViewURLPath{Prefix: strings.TrimSuffix(prefix, "/"), Location: location, Part: part, Cluster: part.Cluster()}, true
}
