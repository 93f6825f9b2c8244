package location

import (
	"context"
	"sync"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper"
	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
)

// statsSource is a Source whose statistics the test sets.
type statsSource struct {
	mu    sync.Mutex
	stats map[string]cache.LocationStats
}

func (s *statsSource) Locations() map[string]cache.LocationStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]cache.LocationStats{}
	for k, v := range s.stats {
		out[k] = v
	}
	return out
}

func (s *statsSource) set(stats map[string]cache.LocationStats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats = stats
}

func nextEvent(t *testing.T, w watch.Interface) (watch.EventType, *mapper.Location) {
	t.Helper()
	select {
	case e, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return e.Type, e.Object.(*mapper.Location)
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return "", nil
}

func TestLocationsListAndWatch(t *testing.T) {
	cm := schema.GroupResource{Resource: "configmaps"}
	src := &statsSource{stats: map[string]cache.LocationStats{
		"east": {Objects: 2, Resources: map[schema.GroupResource]int{cm: 2}, Clusters: map[string]int{"zeta": 1, "alpha": 1}},
	}}
	r := NewREST(Config{Stats: src})
	defer r.Destroy()

	list, err := r.List(context.Background(), &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ll := list.(*mapper.LocationList)
	if len(ll.Items) != 1 || ll.Items[0].Name != "east" || ll.Items[0].Status.Objects != 2 || ll.Items[0].Status.Resources[0].Objects != 2 {
		t.Fatalf("list = %+v", ll.Items)
	}
	if got := ll.Items[0].Status.Clusters; len(got) != 2 || got[0] != (mapper.ClusterCount{Name: "alpha", Objects: 1}) || got[1].Name != "zeta" {
		t.Fatalf("per-cluster counts %+v, want alpha and zeta, sorted", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := r.Watch(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if typ, l := nextEvent(t, w); typ != watch.Added || l.Name != "east" {
		t.Fatalf("first event %s %s, want ADDED east", typ, l.Name)
	}
	src.set(map[string]cache.LocationStats{"east": {Objects: 3}, "west": {Objects: 1}})
	got := map[string]watch.EventType{}
	for len(got) < 2 {
		typ, l := nextEvent(t, w)
		got[l.Name] = typ
	}
	if got["east"] != watch.Modified || got["west"] != watch.Added {
		t.Errorf("after a change: %v, want east MODIFIED and west ADDED", got)
	}
	src.set(map[string]cache.LocationStats{"west": {Objects: 1}})
	if typ, l := nextEvent(t, w); typ != watch.Deleted || l.Name != "east" {
		t.Errorf("after east lost its objects: %s %s, want DELETED east", typ, l.Name)
	}

	if _, err := r.Get(context.Background(), "east", nil); err == nil {
		t.Error("GET of a location without objects or watchers: want 404")
	}
	cancel()
	select {
	case _, ok := <-w.ResultChan():
		for ok {
			_, ok = <-w.ResultChan()
		}
	case <-time.After(5 * time.Second):
		t.Error("the watch did not end when its context did")
	}
}

// TestLocationsWatchList: a watch-list request (sendInitialEvents=true, as client-go's
// informers make by default) gets ADDED for every location, then the BOOKMARK annotated
// k8s.io/initial-events-end at the list's resourceVersion, also when it names the current
// resourceVersion; without that bookmark an informer on `locations` never syncs.
func TestLocationsWatchList(t *testing.T) {
	src := &statsSource{stats: map[string]cache.LocationStats{"east": {Objects: 1}, "west": {Objects: 2}}}
	r := NewREST(Config{Stats: src})
	defer r.Destroy()
	list, err := r.List(context.Background(), &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv := list.(*mapper.LocationList).ResourceVersion
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	send := true
	for _, from := range []string{"", rv} {
		w, err := r.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: from, SendInitialEvents: &send, AllowWatchBookmarks: true,
			FieldSelector: fields.OneTermEqualSelector("metadata.name", "west")})
		if err != nil {
			t.Fatal(err)
		}
		if typ, l := nextEvent(t, w); typ != watch.Added || l.Name != "west" {
			t.Fatalf("from %q: first event %s %s, want ADDED west (the field selector leaves east out)", from, typ, l.Name)
		}
		typ, l := nextEvent(t, w)
		if typ != watch.Bookmark || l.ResourceVersion != rv || l.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
			t.Fatalf("from %q: then %s at %q %v, want the initial-events-end BOOKMARK at %s", from, typ, l.ResourceVersion, l.Annotations, rv)
		}
		w.Stop()
	}
}
