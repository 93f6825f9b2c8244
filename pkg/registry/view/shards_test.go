package view

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// TestShardPaths checks that a hash shard's path (<view>/shards/<i>-of-<n>, after a cluster
// list or not) serves exactly the part's objects on its own: its lists are the shard's objects
// and nothing else, the shards of one count partition the location, its namespaces are the
// shard's, and a GET or a status write by name of an object of another shard is 404 and
// writes nothing.
func TestShardPaths(t *testing.T) {
	var objs []*unstructured.Unstructured
	for _, cl := range []string{"c1", "c2", "c3"} {
		for ns := 0; ns < 8; ns++ {
			objs = append(objs, clusterCM(cl, fmt.Sprintf("ns-%d", ns), "cm", len(objs)+1))
		}
	}
	v, c := newViewsOf(t, objs...)
	const count = 4
	// want returns the objects (cluster/name as itemNames prints them, with the namespace) of
	// part, in key order.
	want := func(part contract.ViewPart) []string {
		var out []string
		for _, o := range objs {
			cl := o.GetAnnotations()[contract.ClusterAnnotation]
			if part.Contains(cl, o.GetNamespace()) {
				out = append(out, cl+"|"+o.GetNamespace())
			}
		}
		slices.Sort(out)
		return out
	}
	listed := func(path string) []string {
		t.Helper()
		code, list := serve(t, v, "GET", path, "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, code, list)
		}
		var out []string
		items, _ := list["items"].([]interface{})
		for _, it := range items {
			md := it.(map[string]interface{})["metadata"].(map[string]interface{})
			out = append(out, md["annotations"].(map[string]interface{})[contract.ClusterAnnotation].(string)+"|"+md["namespace"].(string))
		}
		return out
	}
	seen := map[string]int{}
	for i := 0; i < count; i++ {
		shard := contract.Shard{Index: i, Count: count}
		part := contract.ViewPart{Shard: shard}
		got := listed(part.Path() + "/api/v1/configmaps?resourceVersion=0")
		if w := want(part); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("shard %s: list\n got %v\nwant %v", shard, got, w)
		}
		if len(got) == 0 || len(got) == len(objs) {
			t.Fatalf("shard %s holds %d of %d objects: the fixture does not split", shard, len(got), len(objs))
		}
		for _, k := range got {
			seen[k]++
		}
		// Clusters and a shard together: the intersection.
		cpart := contract.NewViewPart([]contract.ClusterName{"c3", "c1"}, shard)
		if got, w := listed(cpart.Path()+"/api/v1/configmaps?resourceVersion=0"), want(cpart); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("part %s: list\n got %v\nwant %v", cpart, got, w)
		}
		// Namespaces of the shard.
		_, nsList := serve(t, v, "GET", part.Path()+"/api/v1/namespaces", "")
		var nsGot []string
		for _, it := range nsList["items"].([]interface{}) {
			nsGot = append(nsGot, it.(map[string]interface{})["metadata"].(map[string]interface{})["name"].(string))
		}
		nsWant := map[string]bool{}
		for _, k := range want(part) {
			_, ns, _ := strings.Cut(k, "|")
			nsWant[ns] = true
		}
		if len(nsGot) != len(nsWant) {
			t.Errorf("shard %s: namespaces %v, want %v", shard, nsGot, nsWant)
		}
	}
	if len(seen) != len(objs) {
		t.Fatalf("the shards of %d hold %d distinct objects, want all %d", count, len(seen), len(objs))
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%s is in %d shards", k, n)
		}
	}

	// By name: only inside the shard.
	o := objs[0]
	cl, ns := o.GetAnnotations()[contract.ClusterAnnotation], o.GetNamespace()
	own := contract.ShardOf(cl, ns, count)
	other := (own + 1) % count
	byName := fmt.Sprintf("/clusters/%s/shards/%%d-of-%d/api/v1/namespaces/%s/configmaps/cm", cl, count, ns)
	for _, rv := range []string{"?resourceVersion=0", ""} {
		if code, st := serve(t, v, "GET", fmt.Sprintf(byName, own)+rv, ""); code != http.StatusOK {
			t.Errorf("GET in its own shard%s: %d %v", rv, code, st)
		}
		if code, st := serve(t, v, "GET", fmt.Sprintf(byName, other)+rv, ""); code != http.StatusNotFound {
			t.Errorf("GET in another shard%s: %d %v, want 404", rv, code, st)
		}
	}
	patch := `{"status":{"phase":"seen"}}`
	if code, st := serve(t, v, "PATCH", fmt.Sprintf(byName, other)+"/status", patch); code != http.StatusNotFound {
		t.Fatalf("status write in another shard: %d %v, want 404", code, st)
	}
	u, err := c.sources[cl].Resource(cmGVR).Namespace(ns).Get(context.Background(), "cm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, has := u.Object["status"]; has {
		t.Fatalf("a status write through another shard's path reached the source: %v", u.Object["status"])
	}
	if code, st := serve(t, v, "PATCH", fmt.Sprintf(byName, own)+"/status", patch); code != http.StatusOK {
		t.Fatalf("status write in its own shard: %d %v", code, st)
	}

	// Paths that name no shard are 404 and serve nothing.
	for _, p := range []string{"/shards/4-of-4/api/v1/configmaps", "/shards/01-of-4/api/v1/configmaps", "/shards/1/api/v1/configmaps",
		"/shards/1-of-4/clusters/c1/api/v1/configmaps", "/shards//api/v1/configmaps"} {
		if code, st := serve(t, v, "GET", p, ""); code != http.StatusNotFound {
			t.Errorf("GET %s: %d %v, want 404", p, code, st)
		}
	}
}
