package synctarget

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// Shards: when several mappers share a location (docs/mapper.md, "Shards"), each writes its own
// entry of status.shards and, from all entries, the location's Ready condition and object
// counts. One function computes them, so that every shard writes the same sum.

// SetShard puts entry, the status of the shard part, into status.Shards (replacing the entry of
// the same name), drops the entries of the same clusters with another shard count (left by an
// earlier layout: they would count twice), keeps the list sorted by name, and sets
// status.Objects and the Ready condition to the sum over part's siblings (SumShards). live
// reports whether a sibling's mapper is alive (its Lease is renewed); part itself is alive,
// since its mapper is the caller.
func SetShard(status *controlv1alpha1.SyncTargetStatus, part contract.ViewPart, entry controlv1alpha1.ShardStatus, live func(contract.ViewPart) bool) {
	entry.Name = part.String()
	kept := status.Shards[:0:0]
	for _, s := range status.Shards {
		other, err := contract.ParseViewPartName(s.Name)
		switch {
		case s.Name == entry.Name:
			continue
		case err == nil && !part.Shard.IsZero() && !other.Shard.IsZero() &&
			other.Shard.Count != part.Shard.Count && contract.NewViewPart(other.Clusters, contract.Shard{}).Equal(contract.NewViewPart(part.Clusters, contract.Shard{})):
			continue // another layout of the same clusters
		}
		kept = append(kept, s)
	}
	kept = append(kept, entry)
	sort.Slice(kept, func(i, j int) bool { return kept[i].Name < kept[j].Name })
	status.Shards = kept
	sum := SumShards(status.Shards, part.Siblings(), func(p contract.ViewPart) bool { return p.Equal(part) || live(p) })
	status.Objects = sum.Objects
	cond := metav1.Condition{Type: controlv1alpha1.SyncTargetReady, Status: sum.Ready, Reason: sum.Reason, Message: sum.Message}
	meta.SetStatusCondition(&status.Conditions, cond)
}

// ShardSum is a location's state summed over its shards.
type ShardSum struct {
	// Objects is the sum of the counts of the expected shards that have counts (VerifiedTime
	// the oldest of theirs); nil when none has.
	Objects *controlv1alpha1.ObjectCounts
	// Ready, Reason and Message are the location's Ready condition: True (ReasonMapperReady)
	// when every expected shard has an entry, a live mapper and Ready True; otherwise False
	// (ReasonShardsNotReady) with a message naming each shard that is missing or not ready.
	Ready           metav1.ConditionStatus
	Reason, Message string
}

// SumShards sums entries over the expected shards (contract.ViewPart.Siblings); live reports
// whether a shard's mapper is alive. Entries of other parts are not counted.
func SumShards(entries []controlv1alpha1.ShardStatus, expected []contract.ViewPart, live func(contract.ViewPart) bool) ShardSum {
	byName := make(map[string]*controlv1alpha1.ShardStatus, len(entries))
	for i := range entries {
		byName[entries[i].Name] = &entries[i]
	}
	var sum ShardSum
	var problems []string
	for _, p := range expected {
		e := byName[p.String()]
		switch {
		case e == nil || !live(p):
			problems = append(problems, p.String()+" (no live mapper: its Lease is missing or expired)")
		case e.Ready != metav1.ConditionTrue:
			problems = append(problems, fmt.Sprintf("%s (%s: %s)", p.String(), e.Ready, e.Reason))
		}
		if e == nil || e.Objects == nil {
			continue
		}
		if sum.Objects == nil {
			sum.Objects = &controlv1alpha1.ObjectCounts{VerifiedTime: e.Objects.VerifiedTime}
		}
		sum.Objects.Assigned += e.Objects.Assigned
		sum.Objects.InSync += e.Objects.InSync
		sum.Objects.InViolation += e.Objects.InViolation
		if t := e.Objects.VerifiedTime; t != nil && (sum.Objects.VerifiedTime == nil || t.Before(sum.Objects.VerifiedTime)) {
			sum.Objects.VerifiedTime = t
		}
	}
	if len(problems) > 0 {
		sum.Ready, sum.Reason = metav1.ConditionFalse, controlv1alpha1.ReasonShardsNotReady
		sum.Message = fmt.Sprintf("%d of %d shards are not ready: %s.", len(problems), len(expected), strings.Join(problems, "; "))
		return sum
	}
	sum.Ready, sum.Reason = metav1.ConditionTrue, controlv1alpha1.ReasonMapperReady
	sum.Message = fmt.Sprintf("The mappers of all %d shards lead and map their parts of the location's view.", len(expected))
	return sum
}
