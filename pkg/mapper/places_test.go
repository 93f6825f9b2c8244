package mapper

import (
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestPlacesSerializeOnePlace checks that syncs of one target place never overlap (two
// logical clusters' ns/name under the same mapping), while other places are not held up, and
// that the lock entries are dropped afterwards.
func TestPlacesSerializeOnePlace(t *testing.T) {
	p := newPlaces()
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	shared := targetPlace{GVR: gvr, Namespace: "ns", Name: "x"}
	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock := p.lock(shared)
			defer unlock()
			n := inside.Add(1)
			for {
				m := maxInside.Load()
				if n <= m || maxInside.CompareAndSwap(m, n) {
					break
				}
			}
			inside.Add(-1)
		}()
	}
	wg.Wait()
	if maxInside.Load() != 1 {
		t.Fatalf("%d syncs of one place ran at once", maxInside.Load())
	}
	// Another place is free while one is held.
	unlock := p.lock(shared)
	other := p.lock(targetPlace{GVR: gvr, Namespace: "ns", Name: "y"})
	other()
	unlock()
	if len(p.locks) != 0 {
		t.Fatalf("lock entries left: %v", p.locks)
	}
}

// TestPlacesWaiters checks that objects in conflict for a place are handed out once, sorted,
// when it is freed, and that an object that stopped waiting is not.
func TestPlacesWaiters(t *testing.T) {
	p := newPlaces()
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	place := targetPlace{GVR: gvr, Namespace: "ns", Name: "x"}
	key := func(c string) itemKey { return itemKey{GVR: gvr, Cluster: c, Namespace: "ns", Name: "x"} }
	p.wait(place, key("c3"))
	p.wait(place, key("c2"))
	p.wait(place, key("c4"))
	p.done(place, key("c4"))
	if got := p.freed(place); !reflect.DeepEqual(got, []itemKey{key("c2"), key("c3")}) {
		t.Fatalf("freed = %v", got)
	}
	if got := p.freed(place); got != nil {
		t.Fatalf("freed twice: %v", got)
	}
	p.wait(place, key("c2"))
	p.done(place, key("c2"))
	if len(p.waiting) != 0 {
		t.Fatalf("waiting entries left: %v", p.waiting)
	}
}
