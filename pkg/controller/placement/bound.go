package placement

import (
	"github.com/cluster-mapper/cluster-mapper/pkg/placement"
)

// boundOnly returns the locations of locs that the Placements of namespace in cluster may
// choose: those bound to the namespace by a LocationBinding (docs/tenancy.md; all of them in
// the Open mode, Config.Bindings nil), and the others. mapper-apiserver's views would ignore
// an assignment to an unbound location, so a Placement never writes one; the others are
// reported in the Placement's status (entry.unbound). Neither slice is shared with locs.
func (c *Controller) boundOnly(cluster, namespace string, locs []placement.Location) (bound, unbound []placement.Location) {
	x := c.bindings.Index()
	if x == nil {
		return locs, nil
	}
	scope := x.Scope(cluster, namespace)
	bound = make([]placement.Location, 0, len(locs))
	for _, l := range locs {
		if scope.Binds(l.Name) {
			bound = append(bound, l)
		} else {
			unbound = append(unbound, l)
		}
	}
	return bound, unbound
}
