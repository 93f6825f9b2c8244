package mapper

import (
	"fmt"
	"sort"
	"strings"
)

// PlacementEvidence counts the managed target copies of namespaced objects by the namespace
// mapping that placed them. The copies themselves are the record of the mapping a target was
// filled with: each names its source cluster and namespace (invariant 2), and its target
// namespace is either the source namespace (NamespaceMappingSame) or the prefixed one
// (NamespaceMappingPrefixed); the two never coincide, because a prefixed name is always longer
// than the source namespace or ends in a hash.
type PlacementEvidence struct {
	// Same and Prefixed count the copies placed by each mapping.
	Same, Prefixed int
	// SameExample and PrefixedExample name one such copy ("namespace/name"), for messages.
	SameExample, PrefixedExample string
}

// Observe records the managed copy name in targetNamespace whose source is ref. Copies of
// cluster-scoped objects (ref.Namespace "") and copies in a namespace that neither mapping
// gives their source (moved by hand) say nothing and are ignored.
func (e *PlacementEvidence) Observe(targetNamespace, name string, ref SourceRef) {
	if ref.Namespace == "" || targetNamespace == "" {
		return
	}
	where := targetNamespace + "/" + name
	switch targetNamespace {
	case NamespaceMappingSame.TargetNamespace(ref.Cluster, ref.Namespace):
		e.Same++
		if e.SameExample == "" {
			e.SameExample = where
		}
	case NamespaceMappingPrefixed.TargetNamespace(ref.Cluster, ref.Namespace):
		e.Prefixed++
		if e.PrefixedExample == "" {
			e.PrefixedExample = where
		}
	}
}

// ResolveNamespaceMapping resolves NamespaceMappingAuto once per start, from what the target
// holds (evidence, over every managed copy) and the logical clusters of the view objects
// (viewClusters, each name once; viewObjects is how many objects the view holds). It returns
// the mapping and a sentence saying why, for logs and reports:
//
//   - copies placed by one mapping: that mapping, whatever the view shows now. A mapping never
//     changes on a filled target (that would move, i.e. delete and re-create, every copy); a
//     second cluster that appears under NamespaceMappingSame meets the first one's names as
//     conflicts, which are reported.
//   - copies placed by both: an error (a target half-migrated by hand, or two mappers with
//     different explicit mappings); the operator must choose with an explicit mapping.
//   - no copies and more than one cluster in the view: NamespaceMappingPrefixed.
//   - no copies and one cluster: NamespaceMappingSame.
//   - no copies and an empty view: decided is false; the caller asks again when the view holds
//     objects (a fresh location gets its objects after its mapper starts).
func ResolveNamespaceMapping(evidence PlacementEvidence, viewClusters []string, viewObjects int) (mapping NamespaceMapping, why string, decided bool, err error) {
	switch {
	case evidence.Same > 0 && evidence.Prefixed > 0:
		return "", "", false, fmt.Errorf("the target holds copies placed by both namespace mappings (%d as %q, e.g. %s; %d as %q, e.g. %s): "+
			"set --namespace-mapping=%s or =%s explicitly (the other copies are then moved by the orphan sweep)",
			evidence.Same, NamespaceMappingSame, evidence.SameExample, evidence.Prefixed, NamespaceMappingPrefixed, evidence.PrefixedExample,
			NamespaceMappingSame, NamespaceMappingPrefixed)
	case evidence.Same > 0:
		return NamespaceMappingSame, fmt.Sprintf("the target holds %d copies placed by %q (e.g. %s)", evidence.Same, NamespaceMappingSame, evidence.SameExample), true, nil
	case evidence.Prefixed > 0:
		return NamespaceMappingPrefixed, fmt.Sprintf("the target holds %d copies placed by %q (e.g. %s)", evidence.Prefixed, NamespaceMappingPrefixed, evidence.PrefixedExample), true, nil
	case len(viewClusters) > 1:
		sorted := append([]string(nil), viewClusters...)
		sort.Strings(sorted)
		if len(sorted) > 5 {
			sorted = append(sorted[:5], "...")
		}
		return NamespaceMappingPrefixed, fmt.Sprintf("the target holds no namespaced copies and the view holds objects of %d logical clusters (%s)",
			len(viewClusters), strings.Join(sorted, ", ")), true, nil
	case viewObjects > 0:
		cluster := ""
		if len(viewClusters) == 1 {
			cluster = " (" + viewClusters[0] + ")"
		}
		return NamespaceMappingSame, "the target holds no namespaced copies and the view holds objects of one logical cluster" + cluster, true, nil
	}
	return "", "", false, nil
}
