package cache

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/testutil"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/customization"
)

// deferredStore returns a store whose renderings of Customizations are deferred to r, which
// does not run: the test makes them with drain.
func deferredStore(t *testing.T, r *Renderer) *ResourceStore {
	t.Helper()
	return newTestStore(t, StoreOptions{Renderer: r})
}

// drain makes every queued rendering of r in the test's goroutine.
func drain(t *testing.T, r *Renderer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for r.queue.Len() > 0 {
		if !r.processNext(ctx) {
			t.Fatal("the Renderer gave no work")
		}
	}
}

// dataIn returns data[key] of location's view of ns/name and its resourceVersion, failing the
// test when the view does not show it.
func dataIn(t *testing.T, s *ResourceStore, location, ns, name, key string) (string, uint64) {
	t.Helper()
	o, _, ok := s.Get(location, ns, name)
	if !ok {
		t.Fatalf("%s's view has no %s/%s", location, ns, name)
	}
	v, _, _ := unstructured.NestedString(o.Unstructured().Object, "data", key)
	return v, o.ResourceVersion()
}

// TestDeferredRenderingKeepsIngestMoving (docs/views.md, "Deferred renderings"): with a
// Renderer, a version whose rendering runs a Customization is stored at once; the locations
// that showed the previous version keep showing its rendering until the new one is made, and
// an object never shown is withheld (503); the rendering arrives as a re-rendering at the
// store's resourceVersion, after the source's events at it. Other namespaces' objects are
// shown at once meanwhile, and a watch resumed from any resourceVersion sees the same events
// as the live watch (a re-rendering at exactly the resume point is replayed).
func TestDeferredRenderingKeepsIngestMoving(t *testing.T) {
	c := customization.NewCompiler(customization.Options{PlainCluster: "root"})
	r := NewRenderer(RendererOptions{})
	s := deferredStore(t, r)
	s.SetRules(rules(t, c, 1, "us", regionRule("")), 0)
	mustReplace(t, s, 10,
		cm("ns", "a", 10, locs("east"), "d:v=10"),
		cm("other", "b", 10, locs("east"), "d:v=10"))

	// b (no Customization in its namespace) is shown; a waits for its first rendering.
	if res, err := s.List("east", ListOptions{}); err != nil || len(res.Items) != 1 || res.Items[0].Name() != "b" {
		t.Fatalf("east's list before rendering: %v %v, want b only", res.Items, err)
	}
	var status apierrors.APIStatus
	if err := s.WithheldError("east", "", "ns", "a"); !errors.As(err, &status) || status.Status().Code != 503 ||
		!strings.Contains(status.Status().Message, "pending") {
		t.Fatalf("GET of an object whose first rendering is pending: %v, want a 503 that says so", err)
	}
	live := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10})
	mustUpdate(t, s, cm("other", "b", 11, locs("east"), "d:v=11"))
	expect(t, live, "MODIFIED b@11")

	drain(t, r)
	expect(t, live, "ADDED a@11")
	if region := regionIn(t, s, "east", "a"); region != "eu" {
		t.Errorf("east's view of a: region %q, want eu", region)
	}

	// A new version of a: east keeps showing the rendering of 10, at its resourceVersion.
	mustUpdate(t, s, cm("ns", "a", 12, locs("east"), "d:v=12"))
	expectNothing(t, live)
	if v, rv := dataIn(t, s, "east", "ns", "a", "v"); v != "10" || rv != 11 {
		t.Errorf("east's view of a while its rendering is pending: v=%s at %d, want v=10 at 11", v, rv)
	}
	if len(s.RenderFailures()) != 0 {
		t.Errorf("a pending rendering is reported as a failure: %+v", s.RenderFailures())
	}
	mustUpdate(t, s, cm("other", "b", 13, locs("east"), "d:v=13"))
	expect(t, live, "MODIFIED b@13")
	drain(t, r)
	expect(t, live, "MODIFIED a@13")
	if v, rv := dataIn(t, s, "east", "ns", "a", "v"); v != "12" || rv != 13 {
		t.Errorf("east's view of a once rendered: v=%s at %d, want v=12 at 13", v, rv)
	}

	// Resumes replay what the live watch saw after their resourceVersion (a re-rendering that
	// shares the resume point's resourceVersion included).
	for from, want := range map[uint64][]string{
		10: {"MODIFIED b@11", "ADDED a@11", "MODIFIED b@13", "MODIFIED a@13"},
		11: {"ADDED a@11", "MODIFIED b@13", "MODIFIED a@13"},
		12: {"MODIFIED b@13", "MODIFIED a@13"},
		13: {"MODIFIED a@13"},
	} {
		expect(t, mustWatch(t, s, "east", WatchOptions{ResourceVersion: from}), want...)
	}
}

// TestDeferredRenderingOfAnOlderVersion: a rendering made of a version that a newer one
// replaced meanwhile is shown while the newer one's is pending when it is newer than what the
// view shows (an object written faster than it renders still moves), and a failure of it is
// dropped; the newer version's own rendering then replaces it, at a resourceVersion above the
// one the older rendering took (docs/views.md, "Deferred renderings").
func TestDeferredRenderingOfAnOlderVersion(t *testing.T) {
	c := customization.NewCompiler(customization.Options{PlainCluster: "root"})
	r := NewRenderer(RendererOptions{})
	s := deferredStore(t, r)
	rs := rules(t, c, 1, "us", regionRule(""))
	s.SetRules(rs, 0)
	mustReplace(t, s, 10, cm("ns", "a", 10, locs("east"), "d:v=10"))
	drain(t, r)
	live := mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10})
	expect(t, live, "ADDED a@10")

	mustUpdate(t, s, cm("ns", "a", 11, locs("east"), "d:v=11"))
	from := s.objects[contract.NewKey("root", "ns", "a")]
	u := from.content()
	made, err := renderFor(context.Background(), rs, s.gvr, from.cluster, u, from.assigned, "east", 0)
	if err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, s, cm("ns", "a", 12, locs("east"), "d:v=12"))
	s.applyRenderings(context.Background(), from.key, from, rs, map[string]rendering{"east": {u: made}})
	expect(t, live, "MODIFIED a@12")
	if v, _ := dataIn(t, s, "east", "ns", "a", "v"); v != "11" {
		t.Errorf("east shows v=%s, want the rendering of 11 while 12's is pending", v)
	}
	// A failure of the older version changes nothing.
	s.applyRenderings(context.Background(), from.key, from, rs, map[string]rendering{"east": {err: errors.New("boom")}})
	expectNothing(t, live)
	if len(s.RenderFailures()) != 0 {
		t.Errorf("the failure of a replaced version is reported: %+v", s.RenderFailures())
	}
	// The newer version's own rendering finds the view at the store's resourceVersion, 12, and
	// no fresher one (this store has no source): shown at 12 it would show 12 with two
	// contents, so it stays pending until the store moves on.
	drain(t, r)
	expectNothing(t, live)
	if v, _ := dataIn(t, s, "east", "ns", "a", "v"); v != "11" {
		t.Errorf("east shows v=%s, want the rendering of 11 until the store moves on", v)
	}
	if n, err := testutil.GetCounterMetricValue(renderRetries); err != nil || n == 0 {
		t.Error("mapper_apiserver_rendering_retries_total did not count the rendering made again")
	}
	s.UpdateResourceVersion("13") // a source bookmark
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return r.queue.Len() > 0, nil
	}); err != nil {
		t.Fatal("the pending rendering was not queued again")
	}
	drain(t, r)
	expect(t, live, "MODIFIED a@13")
	if v, _ := dataIn(t, s, "east", "ns", "a", "v"); v != "12" {
		t.Errorf("east shows v=%s, want 12", v)
	}
}

// TestDeferredRerenderAfterRulesChange: a rules change defers the renderings that run CEL as
// ingest does: no view changes until they are made, and the re-rendering of an object whose
// view shows the store's resourceVersion takes the source's current one (as SetRules does).
func TestDeferredRerenderAfterRulesChange(t *testing.T) {
	c := customization.NewCompiler(customization.Options{PlainCluster: "root"})
	r := NewRenderer(RendererOptions{})
	r.setSource(func(context.Context, schema.GroupVersionResource) (uint64, error) { return 15, nil })
	s := deferredStore(t, r)
	s.SetRules(rules(t, c, 1, "us", regionRule("")), 0)
	mustReplace(t, s, 10, cm("ns", "o", 10, locs("east", "west"), "d:replicas=10"))
	drain(t, r)
	east := mustWatch(t, s, "east", WatchOptions{})
	west := mustWatch(t, s, "west", WatchOptions{})
	rvBefore := s.ResourceVersion()

	s.SetRules(rules(t, c, 2, "ap", regionRule("")), 14) // west relabelled
	expectNothing(t, west)
	if got := regionIn(t, s, "west", "o"); got != "us" {
		t.Errorf("west before the re-rendering: region %q, want the last rendering (us)", got)
	}
	if rv := s.ResourceVersion(); rv != rvBefore {
		t.Errorf("a rules change that changed no view now moved the store to %d (from %d)", rv, rvBefore)
	}
	drain(t, r)
	expect(t, west, "MODIFIED o@15")
	expectNothing(t, east)
	if got := regionIn(t, s, "west", "o"); got != "ap" {
		t.Errorf("west after the re-rendering: region %q, want ap", got)
	}
}

// TestConsistentGetWaitsForItsRendering: WaitRendered returns once the object's rendering for
// the location is no longer pending, and at once for an object of another namespace.
func TestConsistentGetWaitsForItsRendering(t *testing.T) {
	c := customization.NewCompiler(customization.Options{PlainCluster: "root"})
	r := NewRenderer(RendererOptions{})
	s := deferredStore(t, r)
	s.SetRules(rules(t, c, 1, "us", regionRule("")), 0)
	mustReplace(t, s, 10, cm("ns", "a", 10, locs("east"), "d:v=1"), cm("other", "b", 10, locs("east"), "d:v=1"))

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.WaitRendered(ctx, "east", "root", "other", "b"); err != nil {
		t.Errorf("another namespace's object: %v", err)
	}
	if err := s.WaitRendered(ctx, "east", "root", "ns", "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a pending object: %v, want the context's deadline", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.WaitRendered(context.Background(), "east", "root", "ns", "a") }()
	drain(t, r)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after the rendering: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitRendered did not return after the rendering")
	}
}

// gatedRules renders objects of the namespaces in gates only once their channel is closed.
type gatedRules struct {
	Rules
	gates map[string]chan struct{}
}

// Render waits for the gate of obj's namespace.
func (g *gatedRules) Render(ctx context.Context, gvr schema.GroupVersionResource, cluster string, obj *unstructured.Unstructured, location string) (*unstructured.Unstructured, error) {
	if ch := g.gates[obj.GetNamespace()]; ch != nil {
		<-ch
	}
	return g.Rules.Render(ctx, gvr, cluster, obj, location)
}

// TestRendererIsFairAcrossNamespaces (issue F2): while a namespace's renderings take long, the
// renderings of other namespaces go on, and the slow namespace holds one worker only.
func TestRendererIsFairAcrossNamespaces(t *testing.T) {
	c := customization.NewCompiler(customization.Options{PlainCluster: "root"})
	slow := make(chan struct{})
	snap, errs := c.Snapshot(1, []*controlv1alpha1.Customization{regionRuleIn("a"), regionRuleIn("b")},
		[]customization.Location{{Name: "east", Labels: map[string]string{"region": "eu"}}})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	r := NewRenderer(RendererOptions{Workers: 2})
	s := deferredStore(t, r)
	s.SetRules(&gatedRules{Rules: snap, gates: map[string]chan struct{}{"a": slow}}, 0)
	mustReplace(t, s, 10, cm("a", "x", 10, locs("east"), "d:v=1"), cm("a", "y", 10, locs("east"), "d:v=1"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)

	for i, name := range []string{"p", "q", "r"} {
		rv := uint64(11 + i)
		mustAdd(t, s, cm("b", name, rv, locs("east"), "d:v=1"))
		if err := s.WaitRendered(withTimeout(t, 5*time.Second), "east", "root", "b", name); err != nil {
			t.Fatalf("b/%s not rendered while a's renderings hang: %v", name, err)
		}
	}
	if res, _ := s.List("east", ListOptions{}); len(res.Items) != 3 {
		t.Errorf("east shows %d objects while a's renderings hang, want b's 3", len(res.Items))
	}
	close(slow)
	for _, name := range []string{"x", "y"} {
		if err := s.WaitRendered(withTimeout(t, 5*time.Second), "east", "root", "a", name); err != nil {
			t.Fatalf("a/%s: %v", name, err)
		}
	}
}

// withTimeout returns a context that ends after d or with the test.
func withTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// regionRuleIn is regionRule in namespace ns.
func regionRuleIn(ns string) *controlv1alpha1.Customization {
	c := regionRule("")
	c.Namespace = ns
	return c
}

// TestRenderBudgetPerObject: renderings of one object version that spend more than the
// Renderer's CostPerObject fail with BudgetExceeded: nothing is shown without the
// Customization, and the failure names it.
func TestRenderBudgetPerObject(t *testing.T) {
	c := customization.NewCompiler(customization.Options{PlainCluster: "root"})
	heavy := regionRule("")
	heavy.Spec.Mutations = []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
		JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "add", path: "/data/n", value: string(lists.range(100).map(i, lists.range(100).size()).size())}]`}}}
	r := NewRenderer(RendererOptions{CostPerObject: 1000})
	s := deferredStore(t, r)
	s.SetRules(rules(t, c, 1, "us", heavy), 0)
	mustReplace(t, s, 10, cm("ns", "o", 10, locs("east"), "d:v=1"))
	drain(t, r)
	if _, _, ok := s.Get("east", "ns", "o"); ok {
		t.Error("an object whose rendering spent its budget is shown without its Customization")
	}
	failures := s.RenderFailures()
	var re *customization.RenderError
	if len(failures) != 1 || !errors.As(failures[0].Err, &re) || re.Reason != customization.ReasonBudgetExceeded || re.Customization != "region" {
		t.Fatalf("failures %+v, want one BudgetExceeded of region", failures)
	}
}

// TestSelectorsMatchTheView: a label selector matches the labels a location's view shows. A
// version whose labels changed but whose rendering is pending changes nothing for a selection
// (the view still shows the old labels), in lists and watches; once rendered, the object leaves
// the selection with a DELETED at the re-rendering's resourceVersion, which a resume replays.
// (Before selectors matched the view, the selection followed the source's labels: a watch got
// a DELETED of an object its view still showed as matching, or none at all.)
func TestSelectorsMatchTheView(t *testing.T) {
	c := customization.NewCompiler(customization.Options{PlainCluster: "root"})
	r := NewRenderer(RendererOptions{})
	s := deferredStore(t, r)
	s.SetRules(rules(t, c, 1, "us", regionRule("")), 0)
	mustReplace(t, s, 10, cm("ns", "o", 10, locs("east"), "d:v=1", "l:app=x"))
	drain(t, r)
	appX := func(o *Object) bool { return o.Labels().Get("app") == "x" }
	w := mustWatch(t, s, "east", WatchOptions{Predicate: appX})

	mustUpdate(t, s, cm("ns", "o", 11, locs("east"), "d:v=2", "l:app=y"))
	expectNothing(t, w)
	if res, _ := s.List("east", ListOptions{Predicate: appX}); len(res.Items) != 1 {
		t.Errorf("a list selecting app=x while the relabelled version is pending: %d items, want the object its view shows", len(res.Items))
	}
	drain(t, r)
	expect(t, w, "DELETED o@11")
	if res, _ := s.List("east", ListOptions{Predicate: appX}); len(res.Items) != 0 {
		t.Errorf("a list selecting app=x after the rendering: %d items, want none", len(res.Items))
	}
	// From 10: the first rendering shares 10 (replayed), then the relabelled one.
	expect(t, mustWatch(t, s, "east", WatchOptions{ResourceVersion: 10, Predicate: appX}), "ADDED o@10", "DELETED o@11")
}

// TestDeferredRenderingKeepsViewGenerationOnStatus (docs/status.md, "Summarize"): a view's
// generation moves only with what it shows outside .status, also when a Customization renders
// the view and its rendering is deferred. A location's own status record bumps a Deployment's
// generation at the source; the rendering made afterwards shows the new .status at the
// generation the view showed. Without it the view showed the source's generation, its mapper
// stamped the copy again, the target's controller observed a new generation, the location
// wrote its record again: a write-back loop (make demo, web/frontend). A spec change moves the
// view to the source's generation.
func TestDeferredRenderingKeepsViewGenerationOnStatus(t *testing.T) {
	c := customization.NewCompiler(customization.Options{PlainCluster: "root"})
	rule := regionRule("")
	rule.Spec.Mutations = []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
		JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "add", path: "/spec/region", value: location.metadata.labels["region"]}]`}}}
	r := NewRenderer(RendererOptions{})
	s := deferredStore(t, r)
	s.SetRules(rules(t, c, 1, "us", rule), 0)
	mustReplace(t, s, 10, deployment(10, 1, 3, nil))
	drain(t, r)
	expectView(t, s, "east", "10", 1)

	// east's own status record: the source's generation moves to 2.
	records := map[string]string{"east": `{"replicas":3,"observedGeneration":1}`}
	mustUpdate(t, s, deployment(11, 2, 3, records))
	drain(t, r)
	shown := decodeView(t, expectView(t, s, "east", "11", 1))
	if n, _, _ := unstructured.NestedInt64(shown.Object, "status", "replicas"); n != 3 {
		t.Errorf("east's view shows status.replicas %d, want its record's 3", n)
	}
	if region, _, _ := unstructured.NestedString(shown.Object, "spec", "region"); region != "eu" {
		t.Errorf("east's view shows spec.region %q, want its rendering's eu", region)
	}

	// A spec change: the view shows the source's generation.
	mustUpdate(t, s, deployment(12, 3, 5, records))
	drain(t, r)
	expectView(t, s, "east", "12", 3)
}
