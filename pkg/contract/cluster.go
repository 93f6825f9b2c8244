package contract

import (
	"fmt"
	"regexp"
)

// ClusterName is the name of a logical cluster, the minimal counterpart of kcp's
// logicalcluster.Name (kcp's modules are not a dependency of this project).
type ClusterName string

// clusterNameRE is kcp's rule for logical cluster names: DNS-1123-label-like parts, optionally
// joined by ":" (older kcp paths such as root:org:team).
var clusterNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(:[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)

// ValidateClusterName returns an error saying why name is not a logical cluster name, or nil.
func ValidateClusterName(name string) error {
	if len(name) > 253 || !clusterNameRE.MatchString(name) {
		return fmt.Errorf("%q is not a valid logical cluster name: it must consist of lowercase alphanumerics and '-', "+
			"start and end with an alphanumeric, optionally in parts joined by ':', at most 253 characters", Truncate(name, maxQuoted))
	}
	return nil
}

// String returns the name.
func (n ClusterName) String() string { return string(n) }
