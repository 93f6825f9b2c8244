package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestWatchSet: scenario 2's watch set gives every location at least one object of each of the
// eight resources besides ConfigMaps and Deployments, each object renders as its kind, and with
// the data set every one of the 10 mirrored resources has objects to write.
func TestWatchSet(t *testing.T) {
	cfg, err := Preset("quick")
	if err != nil {
		t.Fatal(err)
	}
	d := newDataset(cfg)
	n := len(d.objects)
	d.addWatchSet()
	d.addWatchSet() // once only
	if want := len(d.locations) * (len(benchResources) - 2); len(d.watchSet) != want || len(d.objects) != n+want {
		t.Fatalf("%d watch-set objects (%d objects in all), want %d", len(d.watchSet), len(d.objects), want)
	}
	owned := map[string]bool{}
	for _, i := range d.watchSet {
		o := d.objects[i]
		for _, l := range o.locs {
			owned[watchKey(resourceOf(o.kind).name, l)] = true
		}
		u := d.watchObject(i)
		if u.GetName() != o.name || u.GetNamespace() != o.namespace || u.GetKind() == "" {
			t.Errorf("object %d rendered as %s %s/%s", i, u.GetKind(), u.GetNamespace(), u.GetName())
		}
	}
	for _, r := range benchResources[2:] {
		for _, l := range d.locations {
			if !owned[watchKey(r.name, l)] {
				t.Errorf("location %s has no object of %s", l, r.name)
			}
		}
	}
	for i, idxs := range d.indexesByResource() {
		if len(idxs) == 0 {
			t.Errorf("no object of %s", benchResources[i].name)
		}
	}
}

// TestListJSONBytes: the streamed sum of a list's items is their JSON size, whatever comes
// before and after "items".
func TestListJSONBytes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"kind":"ConfigMapList","metadata":{"resourceVersion":"7"},"items":[{"a":1},{"b":[2,3]}],"x":{"y":null}}`))
	}))
	defer srv.Close()
	b, n, err := listJSONBytes(context.Background(), srv.Client(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len(`{"a":1}`) + len(`{"b":[2,3]}`)); b != want || n != 2 {
		t.Errorf("got %d bytes in %d items, want %d in 2", b, n, want)
	}
}
