package cache

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// TestRelatedCopiesShownToTheirLocationOnly: an object carrying related.kcp.io/location=east
// is in east's view (list, label-selector list, watch, Assignment) and in no other location's,
// also when its kcp.io/assigned-locations names others; a value that is no location name makes
// no related copy.
func TestRelatedCopiesShownToTheirLocationOnly(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	mustReplace(t, s, 10,
		cm("ns", "main", 5, locs("east", "west")),
		cm("ns", "r-east", 6, nil, "l:"+contract.RelatedLocationLabel+"=east"),
		cm("ns", "r-west", 7, locs("east", "north"), "l:"+contract.RelatedLocationLabel+"=west"),
		cm("ns", "not-a-location", 8, locs("north"), "l:"+contract.RelatedLocationLabel+"=East!"),
	)
	want := map[string]string{"east": "main,r-east", "west": "main,r-west", "north": "not-a-location"}
	for loc, w := range want {
		res, err := s.List(loc, ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := names(res.Items); got != w {
			t.Errorf("%s lists %q, want %q", loc, got, w)
		}
	}
	sel := labels.SelectorFromSet(labels.Set{contract.RelatedLocationLabel: "east"})
	for _, loc := range []string{"east", "west", "north"} {
		res, err := s.List(loc, ListOptions{Predicate: func(o *Object) bool { return sel.Matches(o.Labels()) }})
		if err != nil {
			t.Fatal(err)
		}
		w := ""
		if loc == "east" {
			w = "r-east"
		}
		if got := names(res.Items); got != w {
			t.Errorf("%s lists %q with the selector %s, want %q", loc, got, sel, w)
		}
	}
	if got := s.Assignment(cm("ns", "r-west", 7, locs("east", "north"), "l:"+contract.RelatedLocationLabel+"=west"), "root"); !slices.Equal(got, []string{"west"}) {
		t.Errorf("Assignment of west's related copy = %v, want [west]", got)
	}

	// A watch of north: an object becomes east's related copy (DELETED for north), east gets it.
	wn, we := mustWatch(t, s, "north", WatchOptions{ResourceVersion: 10}), mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10})
	mustUpdate(t, s, cm("ns", "not-a-location", 11, locs("north"), "l:"+contract.RelatedLocationLabel+"=east"))
	if e := nextOrNone(wn); e == nil || e.Type != watch.Deleted || e.Object.(*Object).Name() != "not-a-location" {
		t.Errorf("north got %v, want the DELETED of not-a-location", e)
	}
	if e := nextOrNone(we); e == nil || e.Type != watch.Added || e.Object.(*Object).Name() != "not-a-location" {
		t.Errorf("east got %v, want the ADDED of not-a-location", e)
	}
}
