package mapper

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

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

// prefixedHashLen is the number of hex digits of SHA-256 appended to a shortened prefixed
// namespace name (40 bits: a collision needs about a million namespaces per target).
const prefixedHashLen = 10

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
// name (a DNS-1123 label: at most 63 lowercase alphanumerics or '-'). Otherwise every
// character outside [a-z0-9-] is replaced by '-', the result is cut to 52 characters, and "-"
// plus the first 10 hex digits of SHA-256("<cluster>/<ns>") is appended: at most 63
// characters, stable across restarts and mapper versions, and different for different
// originals with overwhelming probability. The mapper records the original on the target
// namespace and refuses to use a namespace that records another one (a conflict).
func (m NamespaceMapping) TargetNamespace(cluster, ns string) string {
	if ns == "" || m != NamespaceMappingPrefixed {
		return ns
	}
	name := cluster + "-" + ns
	if len(validation.IsDNS1123Label(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(cluster + "/" + ns))
	suffix := hex.EncodeToString(sum[:])[:prefixedHashLen]
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, name)
	maxPrefix := validation.DNS1123LabelMaxLength - 1 - prefixedHashLen
	if len(clean) > maxPrefix {
		clean = clean[:maxPrefix]
	}
	clean = strings.Trim(clean, "-")
	if clean == "" {
		return "ns-" + suffix
	}
	return clean + "-" + suffix
}
