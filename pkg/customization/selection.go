package customization

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Candidate is a source object as SelectedObjects reads it: its resource, labels and the
// locations it is assigned to.
type Candidate struct {
	GVR       schema.GroupVersionResource
	Labels    map[string]string
	Locations []string
}

// SelectedObjects returns, for every Customization of the snapshot (those that do not compile
// included), the number of (object, location) pairs its selectors select: objects of its
// namespace and logical cluster, of a resource its resources name, whose labels its
// objectSelector selects, each with every location the object is assigned to that its
// locationSelector and locationNames select. matchConditions are not evaluated: they decide,
// when an object is rendered, whether a selected object is changed. A Customization that
// selects nothing counts 0.
//
// objects returns the objects of one namespace of one logical cluster; it is called once for
// each namespace that holds Customizations, so the cost is the number of objects in those
// namespaces times their Customizations.
func (s *Snapshot) SelectedObjects(objects func(cluster, namespace string) []Candidate) map[RuleKey]int64 {
	out := map[RuleKey]int64{}
	if s == nil {
		return out
	}
	for sc, rules := range s.scopes {
		for _, r := range rules {
			out[r.key] += 0
		}
		for _, c := range objects(sc.cluster, sc.namespace) {
			if len(c.Locations) == 0 {
				continue
			}
			objLabels := labels.Set(c.Labels)
			for _, r := range rules {
				if !r.selectsObject(c.GVR, sc.cluster, sc.namespace, objLabels) {
					continue
				}
				for _, loc := range c.Locations {
					if r.selectsLocation(s.location(loc)) {
						out[r.key]++
					}
				}
			}
		}
	}
	return out
}
