package cache

import (
	"context"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TestRelistNeverInventsHistory on two stores standing for two replicas: A
// sees the deletions live, B learns of them by a relist. A client that resumes on B from any
// resourceVersion A handed out gets every change A showed after it, or 410 Gone; never a
// silent gap (before the fix B gave the deletions invented RVs in key order, so a resume
// from A's first deletion missed one).
func TestRelistNeverInventsHistory(t *testing.T) {
	a := newTestStore(t, StoreOptions{})
	b := newTestStore(t, StoreOptions{})
	objs := []string{"a", "b", "c"}
	for _, s := range []*ResourceStore{a, b} {
		mustReplace(t, s, 3, cm("ns", "a", 1, locs("east")), cm("ns", "b", 2, locs("east")), cm("ns", "c", 3, locs("east")))
	}
	wa := mustWatch(t, a, "east", WatchOptions{ResourceVersion: 3})
	wb := mustWatch(t, b, "east", WatchOptions{ResourceVersion: 3})
	// Deleted in reverse key order: c@4, b@5, a@6.
	for i := range objs {
		mustDelete(t, a, cm("ns", objs[len(objs)-1-i], uint64(4+i), locs("east")))
	}
	expect(t, wa, "DELETED c@4", "DELETED b@5", "DELETED a@6")
	// B's source watch broke and its relist at 6 shows nothing left.
	mustReplace(t, b, 6)
	expectClosed(t, wb)

	wantAfter := map[uint64][]string{
		3: {"DELETED c@4", "DELETED b@5", "DELETED a@6"},
		4: {"DELETED b@5", "DELETED a@6"},
		5: {"DELETED a@6"},
		6: nil,
	}
	for _, s := range []struct {
		name  string
		store *ResourceStore
	}{{"A", a}, {"B", b}} {
		for from := uint64(3); from <= 6; from++ {
			w, err := s.store.Watch(context.Background(), "east", WatchOptions{ResourceVersion: from})
			if apierrors.IsResourceExpired(err) {
				t.Logf("replica %s, resume from %d: 410", s.name, from)
				continue
			}
			if err != nil {
				t.Fatalf("replica %s, resume from %d: %v", s.name, from, err)
			}
			expect(t, w, wantAfter[from]...)
			w.Stop()
			t.Logf("replica %s, resume from %d: %v", s.name, from, fmt.Sprint(wantAfter[from]))
		}
	}
	if _, err := b.Watch(context.Background(), "east", WatchOptions{ResourceVersion: 4}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("replica B, resume from 4 (before its relist): got %v, want 410", err)
	}
}
