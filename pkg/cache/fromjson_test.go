package cache

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// asSource returns u as the source's object client reads it: its JSON, with managedFields as a
// Kubernetes API server sends them, decoded by source.DecodeObject, which adds add.
func asSource(t *testing.T, u *unstructured.Unstructured, add source.Annotation) *source.Object {
	t.Helper()
	c := u.DeepCopy()
	c.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1"}})
	raw, err := c.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	o, err := source.DecodeObject(raw, add)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// twinStores are two stores fed the same history: bytes as the source's object client reads
// them, and decoded objects (as a dynamic client reads them).
type twinStores struct {
	t                *testing.T
	fromJSON, fromUs *ResourceStore
	// add is what the object client adds to the objects it reads.
	add source.Annotation
}

func (s twinStores) replace(rv uint64, objs ...*unstructured.Unstructured) {
	s.t.Helper()
	mustReplace(s.t, s.fromUs, rv, objs...)
	items := make([]interface{}, len(objs))
	for i, o := range objs {
		items[i] = asSource(s.t, o, s.add)
	}
	if err := s.fromJSON.Replace(items, fmt.Sprint(rv)); err != nil {
		s.t.Fatal(err)
	}
}

func (s twinStores) update(u *unstructured.Unstructured) {
	s.t.Helper()
	mustUpdate(s.t, s.fromUs, u)
	if err := s.fromJSON.Update(asSource(s.t, u, s.add)); err != nil {
		s.t.Fatal(err)
	}
}

func (s twinStores) delete(u *unstructured.Unstructured) {
	s.t.Helper()
	mustDelete(s.t, s.fromUs, u)
	if err := s.fromJSON.Delete(asSource(s.t, u, s.add)); err != nil {
		s.t.Fatal(err)
	}
}

// decoded returns the content of a listed or watched object.
func decoded(t *testing.T, obj interface{}) map[string]interface{} {
	t.Helper()
	o, ok := obj.(*Object)
	if !ok {
		t.Fatalf("%T is not an *Object", obj)
	}
	raw, err := o.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return u.Object
}

// TestJSONIngestMatchesDecodedIngest checks that a store fed the source's bytes
// (source.Object, stored without decoding where buildFromJSON allows) serves exactly what a
// store fed decoded objects serves: the same watch events, resourceVersions and contents, and
// the same lists, for objects of one and several locations, with status records, patches, a
// user's own kcp.io/cluster, re-assignments and deletions, on a plain and on a kcp source. It
// also checks that the plain objects were stored as the source's bytes.
func TestJSONIngestMatchesDecodedIngest(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts StoreOptions
		ann  []string
		add  source.Annotation
	}{
		{"plain", StoreOptions{DefaultCluster: "root"}, nil, source.Annotation{}},
		{"plain, kcp.io/cluster added by the object client", StoreOptions{DefaultCluster: "root"}, nil, source.Annotation{Key: contract.ClusterAnnotation, Value: "root"}},
		{"kcp", StoreOptions{ClusterFromAnnotation: true}, []string{"a:kcp.io/cluster=c1"}, source.Annotation{}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			s := twinStores{t: t, fromJSON: newTestStore(t, mode.opts), fromUs: newTestStore(t, mode.opts), add: mode.add}
			obj := func(name string, rv uint64, l []string, extra ...string) *unstructured.Unstructured {
				return cm("ns", name, rv, l, append(append([]string{}, mode.ann...), extra...)...)
			}
			s.replace(10,
				obj("a", 5, locs("east"), "d:k=1"),
				obj("b", 6, locs("east", "west"), "l:app=web"),
				obj("c", 7, nil),
				obj("d", 8, locs("east"), `a:spec-diff.kcp.io/east=[{"op":"add","path":"/data/x","value":"y"}]`),
				obj("e", 9, locs("east", "west"), `a:status.kcp.io/east={"phase":"Up"}`, "a:kcp.io/status-policy=Reflect"),
				obj("f", 10, locs("east"), "a:kcp.io/cluster=zeta"),
				obj("r", 10, nil, "l:"+contract.RelatedLocationLabel+"=east"),
			)
			if mode.opts.DefaultCluster != "" {
				// A related copy without an assignment is shown as it is: kept as its bytes.
				if r := s.fromJSON.objects[contract.NewKey("root", "ns", "r")]; r == nil || r.u != nil || !r.HasLocation("east") {
					t.Errorf("east's related copy r was not stored as the source's bytes for east: %v", r)
				}
				for _, name := range []string{"a", "b"} {
					stored := s.fromJSON.objects[contract.NewKey("root", "ns", name)]
					src := asSource(t, obj(name, stored.rv, stored.assigned, map[string]string{"a": "d:k=1", "b": "l:app=web"}[name]), s.add)
					want := src.JSON()
					if _, _, added := src.Added(); !added {
						want, _ = src.WithAnnotation(contract.ClusterAnnotation, "root")
					}
					if got, _ := stored.MarshalJSON(); !bytes.Equal(got, want.Bytes()) || stored.u != nil {
						t.Errorf("%s was not stored as the source's bytes:\n got %s\nwant %s", name, got, want)
					}
					// A write built from it changes nothing the source did not have.
					orig := obj(name, stored.rv, stored.assigned, map[string]string{"a": "d:k=1", "b": "l:app=web"}[name])
					if got := sourceObject(t, stored); !reflect.DeepEqual(got.Object, orig.Object) {
						t.Errorf("%s's source object\n got %v\nwant %v", name, got.Object, orig.Object)
					}
				}
			}
			watches := map[string][2]watch.Interface{}
			for _, loc := range []string{"east", "west", "north"} {
				watches[loc] = [2]watch.Interface{mustWatch(t, s.fromJSON, loc, WatchOptions{}), mustWatch(t, s.fromUs, loc, WatchOptions{})}
			}
			s.update(obj("a", 11, locs("east"), "d:k=2"))
			s.update(obj("b", 12, locs("east", "west", "north"), "l:app=web"))
			s.update(obj("a", 13, locs("east", "west"), "d:k=2"))
			s.update(obj("b", 14, locs("east", "west", "north"), "l:app=web", `a:status.kcp.io/west={"phase":"Down"}`))
			s.update(obj("c", 15, locs("west")))
			s.delete(obj("a", 16, locs("east", "west"), "d:k=2"))
			s.update(obj("g", 17, locs("west", "north")))
			s.update(obj("f", 18, locs("east", "north"), "a:kcp.io/cluster=zeta"))
			// A change of .status alone that moves the generation (a resource without a status
			// subresource): the view keeps showing generation 1.
			h := obj("h", 19, locs("east"), "d:k=1")
			h.SetGeneration(1)
			s.update(h)
			h = obj("h", 20, locs("east"), "d:k=1")
			h.SetGeneration(2)
			h.Object["status"] = map[string]interface{}{"phase": "Up"}
			s.update(h)
			for _, st := range []*ResourceStore{s.fromJSON, s.fromUs} {
				if o, _, ok := st.Get("east", "ns", "h"); !ok || o.ResourceVersion() != 20 || o.Unstructured().GetGeneration() != 1 || o.Unstructured().Object["status"] == nil {
					t.Errorf("east's view of h: %v; want resourceVersion 20, generation 1 and the status", o)
				}
			}

			// Writes to an object of several locations that change every view (stored as bytes:
			// templateSuccessor), the second adding a location; then a change of the assignment
			// alone, which the locations that stay do not see.
			s.update(obj("g", 21, locs("west", "north"), "d:k=5"))
			s.update(obj("g", 22, locs("west", "north", "east"), "d:k=6"))
			s.update(obj("g", 23, locs("west", "east"), "d:k=6"))
			// Writes that move metadata.generation: with more than .status changed (stored as
			// bytes), then with .status alone (the views keep showing the old generation), for
			// several locations and for one.
			moved := func(o *unstructured.Unstructured, generation int64, status string) *unstructured.Unstructured {
				o.SetGeneration(generation)
				o.Object["status"] = map[string]interface{}{"phase": status}
				return o
			}
			s.update(moved(obj("g", 24, locs("west", "east"), "d:k=6"), 1, "Up"))
			s.update(moved(obj("g", 25, locs("west", "east"), "d:k=7"), 2, "Up"))
			s.update(moved(obj("g", 26, locs("west", "east"), "d:k=7"), 3, "Down"))
			s.update(moved(obj("h", 27, locs("east"), "d:k=2"), 3, "Up"))
			s.update(moved(obj("h", 28, locs("east"), "d:k=2"), 4, "Down"))
			// A related copy (shown to its location alone), then assigned elsewhere, then another
			// location's.
			s.update(obj("r", 29, nil, "l:"+contract.RelatedLocationLabel+"=east", "d:k=3"))
			s.update(obj("r", 30, locs("west", "north"), "l:"+contract.RelatedLocationLabel+"=east", "d:k=4"))
			s.update(obj("r", 31, nil, "l:"+contract.RelatedLocationLabel+"=west", "d:k=4"))

			for loc, w := range watches {
				events := 0
				for ; ; events++ {
					a, b := nextOrNone(w[0]), nextOrNone(w[1])
					if a == nil && b == nil {
						break
					}
					if a == nil || b == nil {
						t.Fatalf("%s: events differ: from bytes %v, decoded %v", loc, a, b)
					}
					if ev(*a) != ev(*b) || !reflect.DeepEqual(decoded(t, a.Object), decoded(t, b.Object)) {
						t.Fatalf("%s: from bytes %s %v\ndecoded %s %v", loc, ev(*a), decoded(t, a.Object), ev(*b), decoded(t, b.Object))
					}
				}
				if events == 0 {
					t.Errorf("%s: no events", loc)
				}
				la, err := s.fromJSON.List(loc, ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				lb, err := s.fromUs.List(loc, ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if la.ResourceVersion != lb.ResourceVersion || len(la.Items) != len(lb.Items) {
					t.Fatalf("%s: list at %d with %d items from bytes, at %d with %d decoded", loc, la.ResourceVersion, len(la.Items), lb.ResourceVersion, len(lb.Items))
				}
				for i := range la.Items {
					if !reflect.DeepEqual(decoded(t, la.Items[i]), decoded(t, lb.Items[i])) {
						t.Errorf("%s: item %d from bytes %v, decoded %v", loc, i, decoded(t, la.Items[i]), decoded(t, lb.Items[i]))
					}
				}
			}
		})
	}
}

// nextOrNone returns the next event of w, or nil when none comes within 300ms (the store
// delivers an event it applied within microseconds).
func nextOrNone(w watch.Interface) *watch.Event {
	select {
	case e, ok := <-w.ResultChan():
		if !ok {
			return nil
		}
		return &e
	case <-time.After(300 * time.Millisecond):
		return nil
	}
}

// TestTemplateUpdatesStoredAsSourceBytes checks that a write to an object of several locations
// that changes what every view shows (templateSuccessor) is stored from the source's bytes
// without decoding, and still gives each location the right event and view; that versions
// whose bytes do not tell that every view changed (a change of managedFields alone, of the
// assignment alone, the first write after one, a change of .status alone at a new generation)
// are decoded and give the locations that stay no event for what they cannot see, or show them
// the old generation; that a version moved to other locations alone is stored from its bytes
// (every view is new); that a write which moves metadata.generation is stored from its bytes
// when it changes more than .status, for several locations and for one; and that every
// version, decoded or not, keeps the source's bytes in the source's field order, so that the
// write after a decoded one is compared as bytes again.
func TestTemplateUpdatesStoredAsSourceBytes(t *testing.T) {
	s := newTestStore(t, StoreOptions{DefaultCluster: "root"})
	add := source.Annotation{Key: contract.ClusterAnnotation, Value: "root"}
	// The source writes metadata first, as kube-apiserver does; the cache's own encoding would
	// sort the keys.
	// version is the object at resourceVersion rv and metadata.generation generation, with
	// data.k and status.s.
	version := func(rv, generation int, data, status string, l ...string) *source.Object {
		assigned, _ := json.Marshal(l)
		v, _ := json.Marshal(string(assigned))
		raw := fmt.Sprintf(`{"metadata":{"name":"g","namespace":"ns","resourceVersion":"%d","generation":%d,"annotations":{"kcp.io/assigned-locations":%s},"managedFields":[{"manager":"m%d"}]},"kind":"ConfigMap","apiVersion":"v1","data":{"k":%q},"status":{"s":%q}}`, rv, generation, v, rv, data, status)
		o, err := source.DecodeObject([]byte(raw), add)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	if err := s.Replace([]interface{}{version(5, 1, "1", "a", "east", "west")}, "5"); err != nil {
		t.Fatal(err)
	}
	watches := map[string]watch.Interface{}
	for _, loc := range []string{"east", "west", "north"} {
		watches[loc] = mustWatch(t, s, loc, WatchOptions{})
	}
	key := contract.NewKey("root", "ns", "g")
	for _, step := range []struct {
		name    string
		version *source.Object
		// fromBytes says the version is stored without being decoded (everyViewChanged).
		fromBytes bool
		want      map[string]string
		// shows is the resourceVersion and data every location's view shows afterwards.
		shows map[string]string
	}{
		{"data changed", version(6, 1, "2", "a", "east", "west"), true,
			map[string]string{"east": "MODIFIED g@6", "west": "MODIFIED g@6"},
			map[string]string{"east": "6 2 1", "west": "6 2 1"}},
		{"data changed, a location added", version(7, 1, "3", "a", "east", "west", "north"), true,
			map[string]string{"east": "MODIFIED g@7", "west": "MODIFIED g@7", "north": "ADDED g@7"},
			map[string]string{"east": "7 3 1", "west": "7 3 1", "north": "7 3 1"}},
		{"managedFields changed alone", version(8, 1, "3", "a", "east", "west", "north"), false,
			map[string]string{},
			map[string]string{"east": "7 3 1", "west": "7 3 1", "north": "7 3 1"}},
		{"a location removed alone", version(9, 1, "3", "a", "east", "north"), false,
			map[string]string{"west": "DELETED g@9"},
			map[string]string{"east": "7 3 1", "north": "7 3 1"}},
		{"data changed after views kept older versions", version(10, 1, "4", "a", "east", "north"), false,
			map[string]string{"east": "MODIFIED g@10", "north": "MODIFIED g@10"},
			map[string]string{"east": "10 4 1", "north": "10 4 1"}},
		{"data changed again", version(11, 1, "5", "a", "east", "north"), true,
			map[string]string{"east": "MODIFIED g@11", "north": "MODIFIED g@11"},
			map[string]string{"east": "11 5 1", "north": "11 5 1"}},
		{"data and generation changed", version(12, 2, "6", "a", "east", "north"), true,
			map[string]string{"east": "MODIFIED g@12", "north": "MODIFIED g@12"},
			map[string]string{"east": "12 6 2", "north": "12 6 2"}},
		{"status changed alone at a new generation", version(13, 3, "6", "b", "east", "north"), false,
			map[string]string{"east": "MODIFIED g@13", "north": "MODIFIED g@13"},
			map[string]string{"east": "13 6 2", "north": "13 6 2"}},
		{"data changed after views kept an older generation", version(14, 3, "7", "b", "east", "north"), false,
			map[string]string{"east": "MODIFIED g@14", "north": "MODIFIED g@14"},
			map[string]string{"east": "14 7 3", "north": "14 7 3"}},
		{"moved to other locations alone", version(15, 3, "7", "b", "west", "south"), true,
			map[string]string{"east": "DELETED g@15", "north": "DELETED g@15", "west": "ADDED g@15"},
			map[string]string{"west": "15 7 3"}},
		{"data changed, one location left", version(16, 3, "8", "b", "west"), false,
			map[string]string{"west": "MODIFIED g@16"},
			map[string]string{"west": "16 8 3"}},
		{"data and generation changed, one location", version(17, 4, "9", "b", "west"), true,
			map[string]string{"west": "MODIFIED g@17"},
			map[string]string{"west": "17 9 4"}},
		{"moved to another location at a new generation", version(18, 5, "9", "b", "east"), true,
			map[string]string{"west": "DELETED g@18", "east": "ADDED g@18"},
			map[string]string{"east": "18 9 5"}},
		{"status changed alone at a new generation, one location", version(19, 6, "9", "c", "east"), false,
			map[string]string{"east": "MODIFIED g@19"},
			map[string]string{"east": "19 9 5"}},
	} {
		if err := s.Update(step.version); err != nil {
			t.Fatal(err)
		}
		stored := s.objects[key]
		got, _ := stored.MarshalJSON()
		if want := step.version.JSON().Bytes(); !stored.sourceJSON || !bytes.Equal(got, want) {
			t.Errorf("%s: not stored as the source's bytes:\n got %s\n src %s", step.name, got, want)
		}
		if stored.everyViewChanged != step.fromBytes {
			t.Errorf("%s: stored without decoding %v, want %v", step.name, stored.everyViewChanged, step.fromBytes)
		}
		for _, loc := range []string{"east", "west", "north"} {
			var got string
			if e := nextOrNone(watches[loc]); e != nil {
				got = ev(*e)
			}
			if got != step.want[loc] {
				t.Errorf("%s: %s got event %q, want %q", step.name, loc, got, step.want[loc])
			}
			o, _, ok := s.Get(loc, "ns", "g")
			if !ok {
				if step.shows[loc] != "" {
					t.Errorf("%s: %s's view does not show the object, want %q", step.name, loc, step.shows[loc])
				}
				continue
			}
			u := o.Unstructured()
			shows := fmt.Sprintf("%d %s %d", o.ResourceVersion(), u.Object["data"].(map[string]interface{})["k"], u.GetGeneration())
			if shows != step.shows[loc] || u.GetAnnotations()[contract.AssignedLocationsAnnotation] != assignedToOnly(loc) || u.GetResourceVersion() != fmt.Sprint(o.ResourceVersion()) {
				t.Errorf("%s: %s's view shows %q (%v), want %q", step.name, loc, shows, u.GetAnnotations(), step.shows[loc])
			}
		}
	}
}

// TestStoredVersionOwnsItsStrings: a version stored from the source's bytes keeps no string the
// decoder made (its name, uid, resourceVersion, location names): those are allocated next to
// the many strings that die with the source object, and the few kept ones would keep the heap's
// spans that hold them in use after a first sync (ownStrings, BenchmarkStreamedSyncHeap).
func TestStoredVersionOwnsItsStrings(t *testing.T) {
	s := newTestStore(t, StoreOptions{})
	src := asSource(t, cm("ns", "a", 5, locs("east", "west")), source.Annotation{Key: contract.ClusterAnnotation, Value: "root"})
	src.UID = "8a1f2c9e-0000-4000-8000-000000000001"
	if err := s.Replace([]interface{}{src}, "5"); err != nil {
		t.Fatal(err)
	}
	o := s.objects[contract.NewKey("root", "ns", "a")]
	if o == nil {
		t.Fatal("ns/a is not stored")
	}
	if !o.sourceJSON {
		t.Fatal("ns/a was not stored from its bytes")
	}
	assignment := src.Annotations[contract.AssignedLocationsAnnotation]
	for _, c := range []struct{ what, kept, decoded string }{
		{"name", o.name, src.Name},
		{"uid", string(o.uid), string(src.UID)},
		{"resourceVersion", o.rvString, src.ResourceVersion},
		{"location east", o.locations[0], assignment},
		{"location west", o.locations[1], assignment},
	} {
		if sharesMemory(c.kept, c.decoded) {
			t.Errorf("the stored %s %q shares memory with the decoded object's %q", c.what, c.kept, c.decoded)
		}
	}
}

// sharesMemory reports whether the bytes of a lie within those of b.
func sharesMemory(a, b string) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.StringData(a))), uintptr(unsafe.Pointer(unsafe.StringData(b)))
	return pa >= pb && pa < pb+uintptr(len(b))
}
