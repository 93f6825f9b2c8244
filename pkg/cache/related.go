package cache

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// A related copy (an object a location's mapper brought up from its target into the source,
// marked with contract.RelatedLocationLabel; docs/resourcemapping.md, "Related objects") is
// shown in the view of its location only, as if assigned to that location alone, whatever its
// kcp.io/assigned-locations says: the location's mapper lists and watches its copies through
// its view (a label selector related.kcp.io/location=<location>) to keep them in step and to
// delete them after a restart, and no other location ever sees them. The rest of the rules
// apply unchanged (the bindings of docs/tenancy.md, the deletion marks).

// assignedOrRelated returns the locations an object is in the views of before the bindings:
// its related copy's location alone for a related copy (objLabels carry a valid
// contract.RelatedLocationLabel), else assigned (its parsed kcp.io/assigned-locations).
func assignedOrRelated(assigned []string, objLabels map[string]string) []string {
	if loc, ok := contract.RelatedCopyLocation(objLabels); ok {
		// A clone: the value may be a slice of the decoder's strings (identity.ownStrings).
		return []string{strings.Clone(loc)}
	}
	return assigned
}

// labelsOf returns the labels of the identified version (read-only: shared with it, or for a
// decoded version a map of its string-valued labels).
func (id *identity) labelsOf() map[string]string {
	switch {
	case id.raw != nil:
		return id.raw.Labels
	case id.u != nil:
		return stringLabels(id.u)
	}
	return nil
}

// stringLabels returns the string-valued labels of u (u.GetLabels returns none at all when one
// value is not a string).
func stringLabels(u *unstructured.Unstructured) map[string]string {
	l, _, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "labels")
	m, _ := l.(map[string]interface{})
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// relatedCopyAsItIs reports whether id is a related copy of location without a
// kcp.io/assigned-locations annotation: location's view shows it as it is (viewOf rewrites only
// an assignment that is there), so its bytes are its view (jsonSuffices).
func relatedCopyAsItIs(id identity, location string) bool {
	if _, has := id.annotations[contract.AssignedLocationsAnnotation]; has || id.assignmentNotString {
		return false
	}
	loc, ok := contract.RelatedCopyLocation(id.labelsOf())
	return ok && loc == location
}
