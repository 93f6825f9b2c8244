package cache

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

// BenchmarkStreamedSyncHeap measures the first sync of a resource that arrives as a streaming
// list (sendInitialEvents), the way mapper-apiserver syncs from a kube-apiserver that serves
// them: 20,000 ConfigMaps like make bench's (benchObjectsJSON), sent by an HTTP server as watch
// frames and read through the server's own path (the source's object client, client-go's
// reflector started by startMirror, the store with Customizations followed). It reports
// ns/object, and heap/json and inuse/json after a forced garbage collection, as
// BenchmarkStoreHeap does: inuse/json minus heap/json is the free space left between the objects
// the cache keeps by the sync's garbage (fragmentation), which the process keeps resident.
func BenchmarkStreamedSyncHeap(b *testing.B) {
	const total = 20_000
	raws, jsonBytes := benchObjectsJSON(b, total)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" || r.URL.Query().Get("sendInitialEvents") != "true" {
			http.Error(w, "only streaming lists", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		for _, raw := range raws {
			fmt.Fprintf(w, `{"type":"ADDED","object":%s}`+"\n", raw)
		}
		fmt.Fprintf(w, `{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"%d","annotations":{"k8s.io/initial-events-end":"true"}}}}`+"\n", total+1)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	objects, err := source.NewObjectClient(cfg, nil, source.Annotation{Key: contract.ClusterAnnotation, Value: "root"})
	if err != nil {
		b.Fatal(err)
	}
	src, err := source.New(source.Config{Dynamic: dynamic.NewForConfigOrDie(cfg), Discovery: discovery.NewDiscoveryClientForConfigOrDie(cfg), Objects: objects})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		c, err := New(Config{Source: src, Store: StoreOptions{DefaultCluster: "root"}})
		if err != nil {
			b.Fatal(err)
		}
		// As the server's: Customizations followed, none yet (Rules.Differs is asked for every
		// location of every object stored from bytes).
		c.SetRules(customization.Empty())
		before, beforeInuse := collectedHeap()
		b.StartTimer()
		ctx, cancel := context.WithCancel(context.Background())
		m := c.startMirror(ctx, source.ResourceInfo{GVR: testGVR, Kind: "ConfigMap", ListKind: "ConfigMapList", Namespaced: true})
		waitFor(b, "the first sync", m.store.HasSynced)
		b.StopTimer()
		after, afterInuse := collectedHeap()
		b.ReportMetric(float64(after-before)/float64(jsonBytes), "heap/json")
		b.ReportMetric(float64(afterInuse-beforeInuse)/float64(jsonBytes), "inuse/json")
		cancel()
		<-m.done
		m.store.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*total), "ns/object")
}
