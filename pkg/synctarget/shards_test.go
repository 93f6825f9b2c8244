package synctarget

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

func shard(i, n int) contract.ViewPart {
	return contract.ViewPart{Shard: contract.Shard{Index: i, Count: n}}
}

// TestSetShard: each shard's write keeps the others' entries and sets the location's objects
// to their sum; Ready is True only when every shard of the count has a live, ready mapper, and
// the message names each shard that is missing, dead or not ready; entries of another count
// are dropped.
func TestSetShard(t *testing.T) {
	var st controlv1alpha1.SyncTargetStatus
	st.Shards = []controlv1alpha1.ShardStatus{{Name: "shards/0-of-2", Identity: "old", Ready: metav1.ConditionTrue}} // an earlier layout
	alive := map[string]bool{}
	live := func(p contract.ViewPart) bool { return alive[p.String()] }
	entry := func(id string, ready metav1.ConditionStatus, reason string, assigned int64) controlv1alpha1.ShardStatus {
		return controlv1alpha1.ShardStatus{Identity: id, Ready: ready, Reason: reason, Objects: &controlv1alpha1.ObjectCounts{Assigned: assigned, InSync: assigned}}
	}
	ready := func() *metav1.Condition {
		return meta.FindStatusCondition(st.Conditions, controlv1alpha1.SyncTargetReady)
	}

	for i := 0; i < 3; i++ {
		SetShard(&st, shard(i, 4), entry(string(rune('a'+i)), metav1.ConditionTrue, controlv1alpha1.ReasonMapperReady, int64(10+i)), live)
		alive[shard(i, 4).String()] = true
	}
	if len(st.Shards) != 3 || st.Shards[0].Name != "shards/0-of-4" || st.Shards[2].Name != "shards/2-of-4" {
		t.Fatalf("shards %+v: want the 3 entries of count 4, sorted, without the count-2 one", st.Shards)
	}
	if c := ready(); c.Status != metav1.ConditionFalse || c.Reason != controlv1alpha1.ReasonShardsNotReady || !strings.Contains(c.Message, "1 of 4") || !strings.Contains(c.Message, "shards/3-of-4 (no live mapper") {
		t.Fatalf("Ready with shard 3 missing: %+v", c)
	}
	SetShard(&st, shard(3, 4), entry("d", metav1.ConditionFalse, controlv1alpha1.ReasonInitialSync, 13), live)
	alive[shard(3, 4).String()] = true
	if c := ready(); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "shards/3-of-4 (False: InitialSyncInProgress)") {
		t.Fatalf("Ready with shard 3 syncing: %+v", c)
	}
	SetShard(&st, shard(3, 4), entry("d", metav1.ConditionTrue, controlv1alpha1.ReasonMapperReady, 13), live)
	if c := ready(); c.Status != metav1.ConditionTrue || c.Reason != controlv1alpha1.ReasonMapperReady {
		t.Fatalf("Ready with all 4 shards ready: %+v", c)
	}
	if o := st.Objects; o == nil || o.Assigned != 10+11+12+13 || o.InSync != o.Assigned {
		t.Fatalf("objects %+v, want the sum 46", o)
	}
	// Shard 1's mapper dies (its Lease expires): shard 0's next write says so.
	alive[shard(1, 4).String()] = false
	SetShard(&st, shard(0, 4), entry("a", metav1.ConditionTrue, controlv1alpha1.ReasonMapperReady, 10), live)
	if c := ready(); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "shards/1-of-4 (no live mapper") || strings.Contains(c.Message, "shards/0-of-4") {
		t.Fatalf("Ready with shard 1 dead: %+v", c)
	}
	if len(st.Shards) != 4 {
		t.Fatalf("a dead shard's entry must stay (its counts are its copies'): %+v", st.Shards)
	}
}
