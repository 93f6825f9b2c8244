package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// watchFrame is one frame of a JSON watch stream, as kube-apiserver writes it.
type watchFrame struct {
	Type   string `json:"type"`
	Object struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name            string `json:"name"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	} `json:"object"`
}

// TestViewLegacyWatchPath: the deprecated
// /api/v1/watch/namespaces/<ns>/configmaps path inside a view is a watch stream, as
// kube-apiserver serves it (its installer's legacy watch routes), both on mapper-apiserver
// directly and through the aggregator, whose long-running check must keep the stream open
// past the source's --request-timeout: an object created after the timeout arrives as an
// ADDED frame on both streams.
func TestViewLegacyWatchPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const requestTimeout = 10 * time.Second
	source := framework.StartControlPlane(t, framework.ControlPlaneOptions{Name: "source", ExtraArgs: []string{
		fmt.Sprintf("--request-timeout=%ds", int(requestTimeout/time.Second)),
	}})
	srcCfg := source.AdminConfig()
	srcCfg.QPS = -1
	src, err := dynamic.NewForConfig(srcCfg)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "legacy"
	ensureNamespace(t, ctx, src, ns)
	if _, err := src.Resource(configMapsGVR).Namespace(ns).Create(ctx, newConfigMap(ns, "before", "east"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	api := framework.StartAggregatedMapperAPIServer(t, source, "--resources=configmaps")
	defer func() { _ = api.Server.Process.Stop() }()

	paths := map[string]*rest.Config{
		"direct":     api.Server.ViewConfig(source.Admin(), "east"),
		"aggregator": api.ViewConfig(source.Admin(), "east"),
	}
	frames := map[string]<-chan watchFrame{}
	for name, cfg := range paths {
		view, err := dynamic.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		list, err := view.Resource(configMapsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			t.Fatalf("%s: list: %v", name, err)
		}
		frames[name] = legacyWatch(t, ctx, cfg, "/api/v1/watch/namespaces/"+ns+"/configmaps?resourceVersion="+list.GetResourceVersion())
	}

	// Outlive the source's request timeout, then write.
	select {
	case <-time.After(requestTimeout + 5*time.Second):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if _, err := src.Resource(configMapsGVR).Namespace(ns).Create(ctx, newConfigMap(ns, "after", "east"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, ch := range frames {
		select {
		case f, ok := <-ch:
			if !ok {
				t.Fatalf("%s: the legacy watch stream ended before the write arrived", name)
			}
			if f.Type != "ADDED" || f.Object.Kind != "ConfigMap" || f.Object.Metadata.Name != "after" {
				t.Fatalf("%s: first frame %+v, want ADDED ConfigMap after", name, f)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: no frame within a minute of the write", name)
		}
	}
}

// legacyWatch GETs path (a /watch/ URL) under cfg.Host and returns the frames it decodes, in
// order; the channel closes when the stream ends. The response must be 200 and a stream: a
// List answered as one JSON object would decode as a frame without a type and fail the test.
func legacyWatch(t *testing.T, ctx context.Context, cfg *rest.Config, path string) <-chan watchFrame {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	out := make(chan watchFrame, 16)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for {
			var f watchFrame
			if err := dec.Decode(&f); err != nil {
				if !errors.Is(err, io.EOF) && ctx.Err() == nil {
					t.Logf("GET %s: decoding: %v", path, err)
				}
				return
			}
			if f.Type == "" {
				t.Errorf("GET %s: answered %s, not a watch frame", path, f.Object.Kind)
				return
			}
			out <- f
		}
	}()
	return out
}
