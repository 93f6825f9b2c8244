package placement

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/placement"
)

// compatiblePool returns e's pool without the matching locations whose targets do not serve
// one of resources (group-qualified names) compatibly, as their mappers reported in their
// SyncTargets' status.resources, and records them with their reasons in e.skipped. Those
// locations take no new objects of the group; what they have stays (placement.Pool.Without).
func (e *entry) compatiblePool(resources sets.Set[string]) placement.Pool {
	var skip sets.Set[string]
	for _, l := range e.unserved {
		name := l.Name
		if !e.pool.Matches(name) {
			continue
		}
		for gr := range resources {
			reason, served := l.Serves(gr)
			if served {
				continue
			}
			if skip == nil {
				skip = sets.New[string]()
			}
			skip.Insert(name)
			if e.skipped == nil {
				e.skipped = map[string]sets.Set[string]{}
			}
			if e.skipped[name] == nil {
				e.skipped[name] = sets.New[string]()
			}
			e.skipped[name].Insert(fmt.Sprintf("%s: %s", gr, reason))
		}
	}
	return e.pool.Without(skip)
}

// skippedNote is the part of a Ready message that names the matching locations kept from new
// work by an incompatible resource, each with its resources and reasons (at most 10
// locations), "" when there are none.
func (e *entry) skippedNote() string {
	if len(e.skipped) == 0 {
		return ""
	}
	names := sets.List(sets.KeySet(e.skipped))
	described := make([]string, len(names))
	for i, n := range names {
		described[i] = n + " (" + strings.Join(sets.List(e.skipped[n]), ", ") + ")"
	}
	return fmt.Sprintf("; %d selected locations do not serve its resources compatibly and take none of its new objects: %s",
		len(names), contract.JoinFirst(described, 10))
}
