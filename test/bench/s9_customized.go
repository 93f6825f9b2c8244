package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// customizedEvery is the share of namespaces (1 in customizedEvery) whose ConfigMaps a
// Customization changes for every location in scenario 9: about 10% of the ConfigMaps.
const customizedEvery = 10

// customizedKey is the data key scenario 9's Customizations add (the location's name).
const customizedKey = "bench-location"

// scenarioCustomized is scenario 9 ("Bench"): with one Customization in every tenth
// namespace, adding the location's name to the data of each of its ConfigMaps for every
// location (so about 10% of the ConfigMaps render differently per location), it measures the
// re-rendering, RSS, per-location LIST p99 (first and repeated) and watch delivery p99, next to
// the uncustomized figures of scenarios 1, 2 and 4 of the same run (before, uncustomized).
func (e *env) scenarioCustomized(ctx context.Context, list, fanout *Scenario, before memorySample) *Scenario {
	s := &Scenario{ID: 9, Title: "Customized views (10% of the ConfigMaps)", Ran: true}
	start := time.Now()
	framework.InstallControlCRDs(e.tb, ctx, e.source)
	dyn, err := dynamic.NewForConfig(e.source.AdminConfig())
	if err != nil {
		e.tb.Fatal(err)
	}
	customizedNS := map[string]bool{}
	for i, ns := range e.ds.namespaces {
		if i%customizedEvery == 0 {
			customizedNS[ns] = true
		}
	}
	customized, total := 0, 0
	assigned := 0
	for _, o := range e.ds.objects {
		if o.kind != kindConfigMap {
			continue
		}
		total++
		if customizedNS[o.namespace] {
			customized++
			if len(o.locs) > 0 {
				assigned++
			}
		}
	}
	if assigned == 0 {
		s.Ran, s.Reason = false, "no assigned ConfigMap in a customized namespace"
		return s
	}

	e.logf("scenario 9: %d Customizations (%d of %d ConfigMaps)", len(customizedNS), customized, total)
	t0 := time.Now()
	for ns := range customizedNS {
		if _, err := dyn.Resource(customization.Resource).Namespace(ns).Create(ctx, benchCustomization(ns), metav1.CreateOptions{}); err != nil {
			e.tb.Fatalf("scenario 9: creating the Customization of %s: %v", ns, err)
		}
	}
	// The re-rendering is done when every customized namespace shows it: probe one assigned
	// ConfigMap of each, in turn.
	probeURL := func(o *object, loc string) string {
		return e.viewURL(loc) + "/api/v1/namespaces/" + o.namespace + "/configmaps/" + o.name
	}
	deadline := time.Now().Add(5 * time.Minute)
	probed := map[string]bool{}
	for _, o := range e.ds.objects {
		if o.kind != kindConfigMap || !customizedNS[o.namespace] || len(o.locs) == 0 || probed[o.namespace] {
			continue
		}
		probed[o.namespace] = true
		for {
			res, err := timedGet(ctx, e.maHTTP, probeURL(o, o.locs[0]), true)
			if err == nil && dataValue(res.Body, customizedKey) == o.locs[0] {
				break
			}
			if time.Now().After(deadline) {
				e.tb.Fatalf("scenario 9: %s/%s never showed the customization for %s", o.namespace, o.name, o.locs[0])
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	rerender := time.Since(t0)
	after := e.sampleMemory(ctx, "after customizing 10% of the ConfigMaps")

	// LISTs: the same sample of locations as scenario 1, first (every customized object is a new
	// version, never encoded) and repeated.
	r := rand.New(rand.NewSource(e.cfg.Seed + 909))
	perm := r.Perm(len(e.ds.locations))
	locs := make([]string, e.cfg.ListSamples)
	for i := range locs {
		locs[i] = e.ds.locations[perm[i%len(perm)]]
	}
	check := Check{Name: "every listed ConfigMap of a customized namespace shows its location in data." + customizedKey + ", and no other ConfigMap does"}
	listAll := func(record bool) []float64 {
		var lat []float64
		for _, loc := range locs {
			res, err := timedGet(ctx, e.maHTTP, e.viewURL(loc)+"/api/v1/configmaps?resourceVersion=0", record)
			if err != nil {
				e.tb.Fatalf("scenario 9, LIST: %v", err)
			}
			lat = append(lat, ms(res.Latency))
			if !record {
				continue
			}
			var l struct {
				Items []struct {
					Metadata struct{ Namespace, Name string } `json:"metadata"`
					Data     map[string]string                `json:"data"`
				} `json:"items"`
			}
			if err := json.Unmarshal(res.Body, &l); err != nil {
				e.tb.Fatalf("scenario 9, LIST: %v", err)
			}
			for _, it := range l.Items {
				check.Compared++
				want := ""
				if customizedNS[it.Metadata.Namespace] {
					want = loc
				}
				if got := it.Data[customizedKey]; got != want {
					check.Failures++
					if check.Detail == "" {
						check.Detail = fmt.Sprintf("%s's view of %s/%s has %s=%q, want %q", loc, it.Metadata.Namespace, it.Metadata.Name, customizedKey, got, want)
					}
				}
			}
		}
		return lat
	}
	first := summarize(listAll(true))
	repeated := summarize(listAll(false))

	e.logf("scenario 9: %d view watchers", len(e.ds.locations))
	ws := e.openWatchers(ctx, true, e.ds.locations, 0)
	view := e.runPhase(ctx, fmt.Sprintf("%d view watches, 10%% customized", len(ws.streams)), ws, e.cfg.FanoutDuration, e.cfg.Seed+909,
		e.randomWrites(e.cfg.AssignmentWritePercent), nil)
	ws.stop()

	uncustomized := func(sc *Scenario, metric string) float64 {
		if sc != nil {
			for _, c := range sc.Comparisons {
				if c.Metric == metric {
					return c.Ours
				}
			}
		}
		return 0
	}
	s.What = fmt.Sprintf("One Customization in every %dth namespace (%d Customizations) adds `data.%s: <location>` to each of its "+
		"ConfigMaps for every location (JSONPatch with CEL, rendered by the views): %d of %d ConfigMaps (%.1f%%) render differently "+
		"per location. Then the LISTs of scenario 1 (%d locations, resourceVersion=0, first and repeated), one fan-out phase as in "+
		"scenario 2 (%d view watches, %.0f writes/s for %s), and RSS after a forced GC. \"Uncustomized\" are the same figures from "+
		"scenarios 1, 2 and 4 of this run, before the Customizations existed.",
		customizedEvery, len(customizedNS), customizedKey, customized, total, 100*float64(customized)/float64(max(total, 1)),
		len(locs), len(e.ds.locations), e.cfg.WriteRate, e.cfg.FanoutDuration)
	s.Comparisons = []Comparison{
		{Metric: "LIST p99, resourceVersion=0, first LIST", Unit: "ms", Ours: first.P99, Alternative: "uncustomized (scenario 1)", AltValue: uncustomized(list, "LIST p99, resourceVersion=0, first LIST"), LowerIsBetter: true},
		{Metric: "LIST p99, resourceVersion=0, repeated LIST", Unit: "ms", Ours: repeated.P99, Alternative: "uncustomized (scenario 1)", AltValue: uncustomized(list, "LIST p99, resourceVersion=0, repeated LIST"), LowerIsBetter: true},
		{Metric: "delivery latency p99", Unit: "ms", Ours: view.latency.P99, Alternative: "uncustomized (scenario 2)", AltValue: uncustomized(fanout, "delivery latency p99"), LowerIsBetter: true},
		{Metric: "mapper-apiserver RSS", Unit: "MiB", Ours: float64(after.rss) / (1 << 20), Alternative: "uncustomized (end of scenarios 1-3, 7)", AltValue: float64(before.rss) / (1 << 20), LowerIsBetter: true},
	}
	s.Targets = []Target{
		atMost("per-location LIST p99 ≤ 5 ms (resourceVersion=0), first LIST, 10% customized", first.P99, 5, "%.2f ms"),
		atMost(fmt.Sprintf("delivery p99 ≤ 100 ms with %d watchers at %.0f writes/s, 10%% customized", len(e.ds.locations), e.cfg.WriteRate), view.latency.P99, 100, "%.1f ms"),
	}
	s.Tables = []Table{{Title: "Phase:", Header: phaseHeader, Rows: [][]string{phaseRow(view)}}}
	s.Notes = append(s.Notes, fmt.Sprintf("Re-rendering: from the first Customization's creation until every customized ConfigMap showed its location in "+
		"one of its views, %.1f s (includes mapper-apiserver's informer noticing the new CRD).", rerender.Seconds()))
	s.Notes = append(s.Notes, phaseNotes(view)...)
	s.Checks = append(s.Checks, check)
	s.Seconds = time.Since(start).Seconds()
	return s
}

// benchCustomization is scenario 9's Customization of namespace ns.
func benchCustomization(ns string) *unstructured.Unstructured {
	c := &controlv1alpha1.Customization{
		TypeMeta:   metav1.TypeMeta{APIVersion: controlv1alpha1.SchemeGroupVersion.String(), Kind: "Customization"},
		ObjectMeta: metav1.ObjectMeta{Name: "bench-location", Namespace: ns},
		Spec: controlv1alpha1.CustomizationSpec{
			Resources: []controlv1alpha1.ResourceRule{{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}},
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "add", path: "/data/` + customizedKey + `", value: location.metadata.name}]`}}},
		},
	}
	obj, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	return &unstructured.Unstructured{Object: obj}
}

// dataValue returns data[key] of a ConfigMap's JSON, "" when absent.
func dataValue(body []byte, key string) string {
	var cm struct {
		Data map[string]string `json:"data"`
	}
	_ = json.Unmarshal(body, &cm)
	return cm.Data[key]
}
