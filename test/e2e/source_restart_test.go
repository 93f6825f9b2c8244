package e2e

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// sourceOutage is how long the source kube-apiserver stays down: long enough for client-go's
// default reflector backoff (0.8 s doubling to 30 s, jitter up to 2x) to space its attempts
// 25-60 s apart, so without the server's own backoff the write shows late most of the time
// (with a 20 s outage it showed 4.4 s late in one run, under the 5 s bound by luck).
const sourceOutage = 45 * time.Second

// TestSourceRestartRecovery: after a kill -9 of the source kube-apiserver
// and a restart with the same flags and etcd data, a write made after the restart shows in the
// view within 5 s of the source answering /readyz, and a view client's watch stays open
// through the outage and delivers the write.
func TestSourceRestartRecovery(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	source, src := startSource(t)
	const ns = "restart"
	ensureNamespace(t, ctx, src, ns)
	if _, err := src.Resource(configMapsGVR).Namespace(ns).Create(ctx, newConfigMap(ns, "before", "east"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	server := framework.StartMapperAPIServer(t, source, "--resources=configmaps", "--source-discovery-interval=1s")
	// The restarted source is stopped (t.Cleanup, last in, first out) before the server would
	// be: stop the server first, or the source waits for the server's watches to drain.
	defer func() { _ = server.Process.Stop() }()
	view, err := dynamic.NewForConfig(server.ViewConfig(source.Admin(), "east"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := view.Resource(configMapsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("view before the outage: %v", err)
	}
	w, err := view.Resource(configMapsGVR).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	source.KillAPIServer(t)
	t.Logf("source kube-apiserver killed; down for %v", sourceOutage)
	select {
	case e, ok := <-w.ResultChan():
		t.Fatalf("the view's watch during the outage: %v %v (open=%v)", e.Type, e.Object, ok)
	case <-time.After(sourceOutage):
	}
	readyAt := source.StartAPIServerAgain(t)
	t.Logf("source ready again")

	// The write after the restart (the admin client may need a moment to reconnect).
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := src.Resource(configMapsGVR).Namespace(ns).Create(ctx, newConfigMap(ns, "after", "east"), metav1.CreateOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("writing after the restart: %v", err)
	}
	wroteAt := time.Now()
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the view's watch closed after the outage instead of delivering the write")
			}
			if u, isObj := e.Object.(*unstructured.Unstructured); e.Type == watch.Added && isObj && u.GetName() == "after" {
				seen := time.Since(readyAt)
				t.Logf("the view showed the write %v after the source's /readyz (%v after the write)", seen.Round(time.Millisecond), time.Since(wroteAt).Round(time.Millisecond))
				if seen > 5*time.Second {
					t.Fatalf("the view showed the write %v after the source was ready, want at most 5s", seen)
				}
				return
			}
			t.Logf("watch event %s", e.Type)
		case <-deadline:
			t.Fatalf("the view never showed the write made after the restart")
		}
	}
}
