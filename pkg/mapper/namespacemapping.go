package mapper

import "fmt"

// NamespaceMapping decides the target namespace of a source object (--namespace-mapping).
type NamespaceMapping string

const (
	// NamespaceMappingSame keeps the source namespace: for a single source cluster, where
	// namespace names cannot collide.
	NamespaceMappingSame NamespaceMapping = "same"
	// NamespaceMappingPrefixed maps namespace ns of logical cluster c to "<c>-<ns>", shortened
	// with a stable hash when that is not a valid namespace name (see TargetNamespace). The
	// target namespace keeps the original cluster and namespace in contract.SourceClusterAnnotation and
	// contract.SourceNamespaceAnnotation.
	NamespaceMappingPrefixed NamespaceMapping = "prefixed"
	// NamespaceMappingAuto is resolved once per start to NamespaceMappingSame or
	// NamespaceMappingPrefixed by ResolveNamespaceMapping: the mapping that placed the copies
	// already on the target, else prefixed when the view holds more than one logical cluster.
	// TargetNamespace must not be called on it.
	NamespaceMappingAuto NamespaceMapping = "auto"
)

// ParseNamespaceMapping returns the mapping named s, or an error listing the valid names.
func ParseNamespaceMapping(s string) (NamespaceMapping, error) {
	switch m := NamespaceMapping(s); m {
	case NamespaceMappingSame, NamespaceMappingPrefixed, NamespaceMappingAuto:
		return m, nil
	}
	return "", fmt.Errorf("unknown namespace mapping %q: use %q, %q or %q", s, NamespaceMappingAuto, NamespaceMappingSame, NamespaceMappingPrefixed)
}

// TargetNamespace returns the target namespace of source namespace ns in logical cluster
// cluster; "" stays "" (cluster-scoped objects).
//
// For NamespaceMappingPrefixed the result is "<cluster>-<ns>" when that is a valid namespace
// name (a DNS-1123 label: at most 63 lowercase alphanumerics or '-'). Otherwise it is made one
// by HashedLabel with the hash of "<cluster>/<ns>" ("ns-<hash>" when nothing else is left): at
// most 63 characters, stable across restarts and mapper versions, and different for different
// originals with overwhelming probability. The mapper records the original on the target
// namespace and refuses to use a namespace that records another one (a conflict).
func (m NamespaceMapping) TargetNamespace(cluster, ns string) string {
	if ns == "" || m != NamespaceMappingPrefixed {
		return ns
	}
	return HashedLabel(cluster+"-"+ns, cluster+"/"+ns, "ns")
}
