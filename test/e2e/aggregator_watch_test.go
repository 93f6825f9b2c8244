package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// Size and timing of TestViewWatchesThroughAggregator.
const (
	aggWatches        = 300
	aggRequestTimeout = 20 * time.Second
	// aggHold is how long the watches must stay open: 3× the request timeout.
	aggHold = 3 * aggRequestTimeout
)

// aggWatcher is one view watch through the aggregator: the last resourceVersion it received
// and whether its stream ended.
type aggWatcher struct {
	lastRV      atomic.Uint64
	events      atomic.Int64
	closed      atomic.Bool
	closedAfter atomic.Int64 // nanoseconds after the start
}

// TestViewWatchesThroughAggregator: the view is the proxy subresource, which kube-apiserver
// treats as long-running, so on a kube-apiserver with --request-timeout=20s and
// --max-requests-inflight=50:
//   - 300 view watches through the aggregator stay open for 3× the request timeout and keep
//     receiving events (no watch ends; every watch gets the last write, made after 60 s);
//   - `kubectl get` against kube-apiserver keeps succeeding meanwhile (the watches hold no
//     in-flight slot: 300 > 50);
//   - `kubectl get -w --watch-only` through the aggregator stays open and prints an object
//     created after 60 s.
func TestViewWatchesThroughAggregator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	source := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source", ExtraArgs: []string{
		fmt.Sprintf("--request-timeout=%ds", int(aggRequestTimeout/time.Second)), "--max-requests-inflight=50",
	}})
	srcCfg := source.AdminConfig()
	srcCfg.QPS = -1
	src, err := dynamic.NewForConfig(srcCfg)
	if err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, ctx, src, "agg")
	cms := src.Resource(configMapsGVR).Namespace("agg")
	if _, err := cms.Create(ctx, newConfigMap("agg", "ticker", "east"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	api := framework.StartAggregatedMapperAPIServer(t, source, "--resources=configmaps", fmt.Sprintf("--max-watches-per-user=%d", aggWatches+10))

	viewCfg := api.ViewConfig(source.Admin(), "east")
	view, err := dynamic.NewForConfig(viewCfg)
	if err != nil {
		t.Fatal(err)
	}
	list, err := view.Resource(configMapsGVR).Namespace("agg").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list through the aggregator: %v", err)
	}

	start := time.Now()
	wctx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	watchers := make([]*aggWatcher, aggWatches)
	var wg sync.WaitGroup
	for i := range watchers {
		aw := &aggWatcher{}
		watchers[i] = aw
		w, err := view.Resource(configMapsGVR).Namespace("agg").Watch(wctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion(), AllowWatchBookmarks: true})
		if err != nil {
			t.Fatalf("view watch %d through the aggregator: %v", i, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Stop()
			for {
				select {
				case <-wctx.Done():
					return
				case ev, ok := <-w.ResultChan():
					if !ok {
						aw.closed.Store(true)
						aw.closedAfter.Store(int64(time.Since(start)))
						return
					}
					if ev.Type == watch.Added || ev.Type == watch.Modified {
						rv, _ := strconv.ParseUint(ev.Object.(*unstructured.Unstructured).GetResourceVersion(), 10, 64)
						aw.lastRV.Store(rv)
						aw.events.Add(1)
					}
				}
			}
		}()
	}
	t.Logf("%d view watches through the aggregator opened in %v", aggWatches, time.Since(start).Round(time.Millisecond))

	// kubectl get -w --watch-only through the aggregator.
	kubeconfig := source.Admin().KubeconfigFor(t, api.ViewURL("east"), source.ServingCABundle())
	lines := make(chan string, 100)
	kubectlDone := make(chan error, 1)
	go func() {
		kubectlDone <- framework.StreamKubectl(t, wctx, kubeconfig, lines, "get", "configmaps", "-n", "agg", "-w", "--watch-only")
	}()

	// Meanwhile: a write every 5 s, and `kubectl get` against kube-apiserver every 2 s.
	var gets, getFailures atomic.Int64
	var getErrs sync.Map
	gctx, stopGets := context.WithCancel(ctx)
	getsDone := make(chan struct{})
	go func() {
		defer close(getsDone)
		for gctx.Err() == nil {
			out, err := framework.RunKubectl(t, source.AdminKubeconfig(), "get", "configmaps", "-n", "agg", "--request-timeout=10s")
			gets.Add(1)
			if err != nil {
				getFailures.Add(1)
				getErrs.Store(time.Since(start).Round(time.Second).String(), fmt.Sprintf("%v: %s", err, out))
			}
			select {
			case <-gctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}()
	var lastRV uint64
	for i := 0; time.Since(start) < aggHold+2*time.Second; i++ {
		obj, err := cms.Get(ctx, "ticker", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		obj.SetLabels(map[string]string{"tick": strconv.Itoa(i)})
		out, err := cms.Update(ctx, obj, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lastRV, _ = strconv.ParseUint(out.GetResourceVersion(), 10, 64)
		time.Sleep(5 * time.Second)
	}
	// After 3× the request timeout: an object kubectl -w must print.
	late, err := cms.Create(ctx, newConfigMap("agg", "late-arrival", "east"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lateRV, _ := strconv.ParseUint(late.GetResourceVersion(), 10, 64)
	lastRV = max(lastRV, lateRV)
	t.Logf("last write at %v (rv %d)", time.Since(start).Round(time.Millisecond), lastRV)

	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		for _, aw := range watchers {
			if aw.closed.Load() {
				return true, nil // reported below
			}
			if aw.lastRV.Load() < lastRV {
				return false, nil
			}
		}
		return true, nil
	})
	closed, behind := 0, 0
	var minEvents int64 = -1
	for _, aw := range watchers {
		if aw.closed.Load() {
			closed++
			if closed <= 3 {
				t.Errorf("a view watch through the aggregator ended after %v", time.Duration(aw.closedAfter.Load()).Round(time.Millisecond))
			}
		} else if aw.lastRV.Load() < lastRV {
			behind++
		}
		if n := aw.events.Load(); minEvents < 0 || n < minEvents {
			minEvents = n
		}
	}
	t.Logf("after %v: %d of %d watches ended, %d did not receive the last write, fewest events on one watch: %d", time.Since(start).Round(time.Millisecond), closed, aggWatches, behind, minEvents)
	if closed > 0 || behind > 0 || err != nil {
		t.Errorf("view watches through the aggregator: %d ended and %d missed the last write (rv %d) after %v", closed, behind, lastRV, aggHold)
	}

	// kubectl -w printed the late object and is still running.
	sawLate := false
	for !sawLate {
		select {
		case l := <-lines:
			sawLate = strings.Contains(l, "late-arrival")
		case err := <-kubectlDone:
			t.Fatalf("kubectl get -w through the aggregator exited after %v: %v", time.Since(start).Round(time.Millisecond), err)
		case <-time.After(time.Minute):
			t.Fatalf("kubectl get -w --watch-only through the aggregator did not print the object created after %v", aggHold)
		}
	}
	select {
	case err := <-kubectlDone:
		t.Errorf("kubectl get -w exited: %v", err)
	default:
	}
	t.Logf("kubectl get -w --watch-only printed the object created at %v", aggHold)

	stopGets()
	<-getsDone
	t.Logf("kubectl get against kube-apiserver meanwhile: %d runs, %d failures", gets.Load(), getFailures.Load())
	getErrs.Range(func(k, v any) bool {
		t.Errorf("kubectl get against kube-apiserver failed at %v: %v", k, v)
		return true
	})
	if gets.Load() < 10 {
		t.Errorf("only %d kubectl get runs: the check did not run", gets.Load())
	}
	stopWatches()
	wg.Wait()
}
