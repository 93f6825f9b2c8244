package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// viewEvent is what a watch delivered, reduced to what two replicas must agree on.
type viewEvent struct {
	Type            watch.EventType
	Name            string
	ResourceVersion string
}

func (e viewEvent) String() string { return fmt.Sprintf("%s %s@%s", e.Type, e.Name, e.ResourceVersion) }

// TestRelistOnOneReplica: two mapper-apiserver replicas mirror one source;
// the source watch of replica A is partitioned away (a TCP proxy between A and the source is
// cut) while objects are deleted, changed and created, and etcd is compacted past A's position
// (the source runs without a watch cache for configmaps, so its watches come from etcd and a
// watch from a compacted resourceVersion answers 410). A must relist. Afterwards a client that
// resumes a watch on A from any resourceVersion it was shown by replica B gets exactly B's
// events from there on, or a 410 (client-go then relists by itself): never a silent gap and
// never an event B did not show. A resume on B itself gets every change.
func TestRelistOnOneReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	source := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source", ExtraArgs: []string{"--watch-cache-sizes=configmaps#0"}})
	cfg := source.AdminConfig()
	cfg.QPS = -1
	src, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const ns, objects = "relist", 30
	ensureNamespace(t, ctx, src, ns)
	for i := 0; i < objects; i++ {
		if _, err := src.Resource(configMapsGVR).Namespace(ns).Create(ctx, newConfigMap(ns, fmt.Sprintf("cm-%02d", i), "east"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Replica A reaches the source through a proxy the test can cut; replica B directly.
	sourceURL, err := url.Parse(source.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := framework.StartTCPProxy(t, sourceURL.Host)
	proxied := source.AdminConfig()
	proxied.Host = "https://" + proxy.Addr
	proxiedKubeconfig := filepath.Join(t.TempDir(), "source-via-proxy.kubeconfig")
	if err := framework.WriteKubeconfig(proxiedKubeconfig, proxied); err != nil {
		t.Fatal(err)
	}
	args := []string{"--resources=configmaps", "--source-discovery-interval=1s"}
	replicaA := framework.StartMapperAPIServer(t, source, append(args, "--source-kubeconfig="+proxiedKubeconfig)...)
	replicaB := framework.StartMapperAPIServer(t, source, args...)
	// Stop the servers before the source (t.Cleanup runs last in, first out; the source would
	// otherwise wait for their watches to drain).
	defer func() { _ = replicaA.Process.Stop(); _ = replicaB.Process.Stop() }()
	viewA, err := dynamic.NewForConfig(replicaA.ViewConfig(source.Admin(), "east"))
	if err != nil {
		t.Fatal(err)
	}
	viewB, err := dynamic.NewForConfig(replicaB.ViewConfig(source.Admin(), "east"))
	if err != nil {
		t.Fatal(err)
	}

	// r0: a resourceVersion both replicas have reached, and B's watch from it. Each replica
	// starts at the source's resourceVersion when it first lists (a Lease renewal apart), and
	// a replica moves on only with an event of the resource: a source without a watch cache
	// sends no bookmarks. A write of an unassigned ConfigMap is that event for both; B's list
	// follows it.
	marker, err := src.Resource(configMapsGVR).Namespace(ns).Create(ctx, newConfigMap(ns, "marker"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	listB, err := viewB.Resource(configMapsGVR).Namespace(ns).List(ctx, metav1.ListOptions{ResourceVersion: marker.GetResourceVersion(), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil || len(listB.Items) != objects {
		t.Fatalf("replica B's first list: %d items, %v", len(listB.Items), err)
	}
	r0 := listB.GetResourceVersion()
	if _, err := viewA.Resource(configMapsGVR).Namespace(ns).List(ctx, metav1.ListOptions{ResourceVersion: r0, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}); err != nil {
		t.Fatalf("replica A at resourceVersion %s: %v", r0, err)
	}
	watchB, err := viewB.Resource(configMapsGVR).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: r0})
	if err != nil {
		t.Fatal(err)
	}
	defer watchB.Stop()
	restartsBefore := replicaA.Metric(t, source.Admin(), "mapper_apiserver_history_restarts_total", `resource="configmaps"`)

	// Partition A, then change the source: 10 deletes in reverse name order, each followed by
	// an update of another object, then 5 creates. (A relist that invented deletion
	// resourceVersions would hand the free ones out in name order and get them wrong.)
	proxy.Cut()
	t.Logf("replica A partitioned from the source at resourceVersion %s", r0)
	for i := 9; i >= 0; i-- {
		if err := src.Resource(configMapsGVR).Namespace(ns).Delete(ctx, fmt.Sprintf("cm-%02d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		patch := []byte(`{"data":{"key":"changed"}}`)
		if _, err := src.Resource(configMapsGVR).Namespace(ns).Patch(ctx, fmt.Sprintf("cm-%02d", 19-i), "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := objects; i < objects+5; i++ {
		if _, err := src.Resource(configMapsGVR).Namespace(ns).Create(ctx, newConfigMap(ns, fmt.Sprintf("cm-%02d", i), "east"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const changes = 25
	var eventsB []viewEvent
	for len(eventsB) < changes {
		select {
		case e, ok := <-watchB.ResultChan():
			if !ok {
				t.Fatalf("replica B's watch ended after %d events", len(eventsB))
			}
			u, isObj := e.Object.(*unstructured.Unstructured)
			if !isObj {
				t.Fatalf("replica B's watch: %s %#v", e.Type, e.Object)
			}
			eventsB = append(eventsB, viewEvent{e.Type, u.GetName(), u.GetResourceVersion()})
		case <-ctx.Done():
			t.Fatalf("replica B showed %d of %d changes", len(eventsB), changes)
		}
	}
	last := eventsB[len(eventsB)-1].ResourceVersion

	// Compact etcd past A's position, so A's re-watch from r0 answers 410, then heal.
	compactEtcd(t, ctx, source.Etcd, last)
	proxy.Restore()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return replicaA.Metric(t, source.Admin(), "mapper_apiserver_history_restarts_total", `resource="configmaps"`) > restartsBefore, nil
	}); err != nil {
		t.Fatalf("replica A never relisted after the partition: %v", err)
	}
	listA, err := viewA.Resource(configMapsGVR).Namespace(ns).List(ctx, metav1.ListOptions{ResourceVersion: last, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil || len(listA.Items) != objects-10+5 {
		t.Fatalf("replica A after its relist: %d items (want %d), %v", len(listA.Items), objects-10+5, err)
	}
	t.Logf("replica A relisted at resourceVersion %s", listA.GetResourceVersion())

	// Resume on each replica from r0 and from every resourceVersion B showed.
	resumes := append([]string{r0}, func() []string {
		rvs := make([]string, 0, len(eventsB))
		for _, e := range eventsB {
			rvs = append(rvs, e.ResourceVersion)
		}
		return rvs
	}()...)
	expired := 0
	for i, rv := range resumes {
		want := eventsB[i:]
		gotB, goneB := resumeWatch(t, ctx, viewB, ns, rv, len(want))
		if goneB || !slices.Equal(gotB, want) {
			t.Fatalf("a resume on replica B from %s: gone=%v events %v, want %v", rv, goneB, gotB, want)
		}
		gotA, goneA := resumeWatch(t, ctx, viewA, ns, rv, len(want))
		switch {
		case goneA:
			expired++
		case !slices.Equal(gotA, want):
			t.Fatalf("a resume on replica A from %s (shown by B) got %v, want B's %v or a 410", rv, gotA, want)
		}
	}
	t.Logf("%d resumes on replica A: %d answered 410, %d delivered B's events exactly", len(resumes), expired, len(resumes)-expired)
}

// resumeWatch watches the view's configmaps in ns from resourceVersion rv and returns the first
// n events, or gone=true when the view answers 410 (at the request or as an ERROR event). A
// resume that delivers fewer than n events within 5 s returns what it got.
func resumeWatch(t *testing.T, ctx context.Context, view dynamic.Interface, ns, rv string, n int) (events []viewEvent, gone bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	w, err := view.Resource(configMapsGVR).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return nil, true
		}
		t.Fatalf("watch from %s: %v", rv, err)
	}
	defer w.Stop()
	for len(events) < n {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				return events, false
			}
			if e.Type == watch.Error {
				if status, isStatus := e.Object.(*metav1.Status); isStatus && status.Code == http.StatusGone {
					return events, true
				}
				if err := apierrors.FromObject(e.Object); apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					return events, true
				}
				t.Fatalf("watch from %s: error event %#v", rv, e.Object)
			}
			u, isObj := e.Object.(*unstructured.Unstructured)
			if !isObj {
				continue
			}
			events = append(events, viewEvent{e.Type, u.GetName(), u.GetResourceVersion()})
		case <-ctx.Done():
			return events, false
		}
	}
	return events, false
}

// compactEtcd compacts etcd's history up to revision rv (a kube-apiserver resourceVersion is an
// etcd revision) through etcd's gRPC gateway, as kube-apiserver's own compactor does every
// five minutes: a watch from an older revision then fails with "too old resource version".
func compactEtcd(t *testing.T, ctx context.Context, etcd *framework.Etcd, rv string) {
	t.Helper()
	rev, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q is not an etcd revision: %v", rv, err)
	}
	body := fmt.Sprintf(`{"revision":"%d","physical":true}`, rev)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, etcd.URL+"/v3/kv/compaction", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("compacting etcd: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("compacting etcd at %d: %s", rev, resp.Status)
	}
	t.Logf("etcd compacted at revision %d", rev)
}
