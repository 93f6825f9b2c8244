package cache

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// withUID sets the object's UID (kcp mode follows objects by UID across cluster changes).
func withUID(u *unstructured.Unstructured, uid string) *unstructured.Unstructured {
	u.SetUID(types.UID(uid))
	return u
}

// clusterPart returns the part of one logical cluster (the whole location for "").
func clusterPart(cluster string) contract.ViewPart {
	if cluster == "" {
		return contract.ViewPart{}
	}
	return contract.NewViewPart([]contract.ClusterName{contract.ClusterName(cluster)}, contract.Shard{})
}

// listKeys returns the keys of location's objects (of cluster, or all when "").
func listKeys(t *testing.T, s *ResourceStore, location, cluster string) string {
	t.Helper()
	res, err := s.List(location, ListOptions{Part: clusterPart(cluster)})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var keys []string
	for _, o := range res.Items {
		keys = append(keys, string(o.Key()))
	}
	return strings.Join(keys, " ")
}

// TestPlainSourceIgnoresClusterAnnotation (ghost
// objects): on a plain source, changing kcp.io/cluster on an object used to leave a copy under
// the old key, still listed after the source object was deleted.
func TestPlainSourceIgnoresClusterAnnotation(t *testing.T) {
	s := newTestStore(t, StoreOptions{DefaultCluster: "root"})
	mustReplace(t, s, 1)
	w := mustWatch(t, s, "east", WatchOptions{})
	in := cm("ns", "x", 2, locs("east"), "a:kcp.io/cluster=a")
	mustAdd(t, s, in)
	mustUpdate(t, s, cm("ns", "x", 3, locs("east"), "a:kcp.io/cluster=b"))
	mustUpdate(t, s, cm("ns", "x", 4, locs("east")))
	expect(t, w, "ADDED x@2", "MODIFIED x@3", "MODIFIED x@4")
	if got := listKeys(t, s, "east", ""); got != "root|ns/x" {
		t.Fatalf("keys %q, want only root|ns/x", got)
	}
	o, _, ok := s.GetInCluster("east", "root", "ns", "x")
	if !ok {
		t.Fatalf("object not in cluster root")
	}
	if c := o.Unstructured().GetAnnotations()[contract.ClusterAnnotation]; c != "root" {
		t.Fatalf("served kcp.io/cluster %q, want the configured cluster root", c)
	}
	if c := in.GetAnnotations()[contract.ClusterAnnotation]; c != "a" {
		t.Fatalf("the store changed the reflector's object: kcp.io/cluster=%q", c)
	}
	mustDelete(t, s, cm("ns", "x", 5, locs("east"), "a:kcp.io/cluster=c"))
	expect(t, w, "DELETED x@5")
	if got := listKeys(t, s, "east", ""); got != "" {
		t.Fatalf("after the delete the view still lists %q (ghost)", got)
	}
	if st := s.Locations()["east"]; st.Objects != 0 {
		t.Fatalf("location still counts %d objects", st.Objects)
	}
}

// TestPlainSourceClusterAnnotationOncePerVersion checks that the served kcp.io/cluster is part
// of the stored object version (so its encoding is cached with it), and that SourceObject gives
// back the source's own object.
func TestPlainSourceClusterAnnotationOncePerVersion(t *testing.T) {
	s := newTestStore(t, StoreOptions{DefaultCluster: "root"})
	mustReplace(t, s, 1, cm("ns", "x", 1, locs("east"), "a:kcp.io/cluster=user-wrote-this"))
	a, _, _ := s.GetInCluster("east", "root", "ns", "x")
	b, _, _ := s.GetInCluster("east", "root", "ns", "x")
	if a != b {
		t.Fatalf("two reads of one version returned different objects")
	}
	j, err := a.MarshalJSON()
	if err != nil || !strings.Contains(string(j), `"kcp.io/cluster":"root"`) {
		t.Fatalf("encoding %s %v", j, err)
	}
	if c := sourceObject(t, a).GetAnnotations()[contract.ClusterAnnotation]; c != "user-wrote-this" {
		t.Fatalf("SourceObject kcp.io/cluster = %q, want the source's own value", c)
	}
}

// TestKCPClusterChangeIsDeletePlusAdd checks that on a kcp source an object whose
// kcp.io/cluster changes (kcp never does it; the store must not rely on that) is a deletion of
// its old key and an addition of its new one, never a ghost.
func TestKCPClusterChangeIsDeletePlusAdd(t *testing.T) {
	s := newTestStore(t, StoreOptions{ClusterFromAnnotation: true})
	mustReplace(t, s, 1)
	w := mustWatch(t, s, "east", WatchOptions{})
	mustAdd(t, s, withUID(cm("ns", "x", 2, locs("east"), "a:kcp.io/cluster=a"), "u1"))
	mustUpdate(t, s, withUID(cm("ns", "x", 5, locs("east"), "a:kcp.io/cluster=b"), "u1"))
	// The deletion takes the free RV before the addition's.
	expect(t, w, "ADDED x@2", "DELETED x@4", "ADDED x@5")
	if got := listKeys(t, s, "east", ""); got != "b|ns/x" {
		t.Fatalf("keys %q", got)
	}
	// A resume from the DELETED event's RV still gets the ADDED.
	rw := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 4})
	expect(t, rw, "ADDED x@5")
	// Losing the cluster annotation deletes it too.
	mustUpdate(t, s, withUID(cm("ns", "x", 6, locs("east")), "u1"))
	expect(t, w, "DELETED x@6")
	if got := listKeys(t, s, "east", ""); got != "" {
		t.Fatalf("keys %q after the annotation was removed", got)
	}
	// A final state naming another cluster than the stored one still deletes the stored key.
	mustUpdate(t, s, withUID(cm("ns", "y", 7, locs("east"), "a:kcp.io/cluster=a"), "u2"))
	mustDelete(t, s, withUID(cm("ns", "y", 8, locs("east"), "a:kcp.io/cluster=z"), "u2"))
	expect(t, w, "ADDED y@7", "DELETED y@8")
	if got := listKeys(t, s, "east", ""); got != "" {
		t.Fatalf("keys %q after delete", got)
	}
	// A relist that shows the object in another cluster: old key deleted, new key added.
	mustAdd(t, s, withUID(cm("ns", "z", 9, locs("east"), "a:kcp.io/cluster=a"), "u3"))
	expect(t, w, "ADDED z@9")
	mustReplace(t, s, 20, withUID(cm("ns", "z", 15, locs("east"), "a:kcp.io/cluster=b"), "u3"))
	if got := listKeys(t, s, "east", ""); got != "b|ns/z" {
		t.Fatalf("keys %q after relist", got)
	}
}

// TestKCPInvalidClusterNotServed checks that a kcp object without a valid kcp.io/cluster is
// counted once per version, and not served.
func TestKCPInvalidClusterNotServed(t *testing.T) {
	s := newTestStore(t, StoreOptions{ClusterFromAnnotation: true})
	before, _ := testutil.GetCounterMetricValue(invalidClusters.WithLabelValues("configmaps"))
	bad := []*unstructured.Unstructured{
		withUID(cm("ns", "none", 1, locs("east")), "u1"),
		withUID(cm("ns", "upper", 2, locs("east"), "a:kcp.io/cluster=Upper"), "u2"),
		withUID(cm("ns", "bar", 3, locs("east"), "a:kcp.io/cluster=a|b"), "u3"),
	}
	good := withUID(cm("ns", "ok", 4, locs("east"), "a:kcp.io/cluster=root:org"), "u4")
	mustReplace(t, s, 10, append(bad, good)...)
	mustReplace(t, s, 11, append(bad, good)...) // a relist of the same versions counts nothing new
	if got := listKeys(t, s, "east", ""); got != "root:org|ns/ok" {
		t.Fatalf("keys %q", got)
	}
	after, _ := testutil.GetCounterMetricValue(invalidClusters.WithLabelValues("configmaps"))
	if after-before != 3 {
		t.Fatalf("invalid cluster count grew by %v, want 3", after-before)
	}
}

// TestClusterRange checks per-cluster lists (paged) and watches, and Lookup.
func TestClusterRange(t *testing.T) {
	s := newTestStore(t, StoreOptions{ClusterFromAnnotation: true})
	var objs []*unstructured.Unstructured
	rv := uint64(0)
	for _, c := range []string{"a", "b", "b:x", "c"} {
		for _, n := range []string{"m", "n", "o"} {
			rv++
			objs = append(objs, cm("ns", n, rv, locs("east"), "a:kcp.io/cluster="+c))
		}
	}
	mustReplace(t, s, 100, objs...)
	if got := listKeys(t, s, "east", "b"); got != "b|ns/m b|ns/n b|ns/o" {
		t.Fatalf("cluster b: %q", got)
	}
	if got := listKeys(t, s, "east", "d"); got != "" {
		t.Fatalf("cluster d: %q", got)
	}
	// Pages of 2 within cluster b.
	p1, err := s.List("east", ListOptions{Part: clusterPart("b"), Limit: 2})
	if err != nil || len(p1.Items) != 2 || !p1.More {
		t.Fatalf("page 1: %+v %v", p1, err)
	}
	p2, err := s.List("east", ListOptions{Part: clusterPart("b"), Limit: 2, After: p1.Items[1].Key(), SnapshotRV: p1.ResourceVersion})
	if err != nil || len(p2.Items) != 1 || p2.More || p2.Items[0].Key() != "b|ns/o" {
		t.Fatalf("page 2: %+v %v", p2, err)
	}
	if n := s.Namespaces("east", clusterPart("b"))["ns"]; n != 3 {
		t.Fatalf("namespaces of b: %d", n)
	}
	if n := s.Namespaces("east", contract.ViewPart{})["ns"]; n != 12 {
		t.Fatalf("namespaces of all: %d", n)
	}
	if st := s.Locations()["east"]; st.Clusters["b:x"] != 3 || len(st.Clusters) != 4 {
		t.Fatalf("cluster counts %v", st.Clusters)
	}
	found, _ := s.Lookup("east", "ns", "n")
	if len(found) != 4 || found[0].Cluster() != "a" || found[3].Cluster() != "c" {
		t.Fatalf("Lookup: %v", found)
	}

	w := mustWatch(t, s, "east", WatchOptions{Part: clusterPart("b"), InitialEvents: true})
	expect(t, w, "ADDED m@4", "ADDED n@5", "ADDED o@6")
	mustUpdate(t, s, cm("ns", "m", 101, locs("east"), "a:kcp.io/cluster=a"))
	mustUpdate(t, s, cm("ns", "m", 102, locs("east"), "a:kcp.io/cluster=b"))
	mustUpdate(t, s, cm("ns", "m", 103, locs("east"), "a:kcp.io/cluster=b:x"))
	expect(t, w, "MODIFIED m@102")
}
