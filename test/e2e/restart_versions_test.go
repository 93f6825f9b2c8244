package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// TestRestartKeepsOneContentPerResourceVersion: a Deployment assigned to east and west that
// reflects status; west writes its status through its view, then east's mapper reflects the
// status of its target copy. Each record bumps the source's generation (kube-apiserver does
// for a Deployment's annotations), and east's view shows its own write at the write's
// resourceVersion with the generation it showed before (docs/views.md). mapper-apiserver then
// restarts (SIGTERM, as after a crash it starts with an empty cache).
//
//   - No resourceVersion is shown with two contents: every object listed or in an ADDED or
//     MODIFIED event of both views, before and after the restart, by a client that resumes and
//     relists like an informer, and by fresh lists at the end, is compared by location, object
//     and resourceVersion.
//   - East's target converges within seconds, without a restart of the mapper: its copy is
//     stamped with the generation east's view shows now (kcp.io/source-generation).
//
// Fails before the restart fence and settleFirstListed (pkg/cache): after the restart east's
// view showed the object at the resourceVersion of east's write with the source's generation 3
// (generation 1 before), and the mapper, which skips an update whose resourceVersion did not
// change, kept its copy at generation 1.
func TestRestartKeepsOneContentPerResourceVersion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := startMapperEnv(t, ctx, "east", "west")
	ensureNamespace(t, ctx, env.src, "restart")
	d := decorateFixture(newDeployment("restart", "d", "east", "west"), true)
	if _, err := env.src.Resource(deploymentsGVR).Namespace("restart").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.startMapper(t, "mapper-east", "east", nil)
	env.converge(t, ctx, "start-up", "east")

	shown := newShownContents()
	views := map[string]dynamic.Interface{}
	followCtx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	for _, loc := range []string{"east", "west"} {
		views[loc] = dynamicClientForConfig(t, env.server.ViewConfig(env.source.Admin(), loc))
		go shown.follow(followCtx, loc, views[loc].Resource(deploymentsGVR))
	}

	// West writes its status through its view.
	west, err := views["west"].Resource(deploymentsGVR).Namespace("restart").Get(ctx, "d", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	west.Object["status"] = map[string]interface{}{"observedGeneration": west.GetGeneration(), "replicas": int64(2)}
	if _, err := views["west"].Resource(deploymentsGVR).Namespace("restart").UpdateStatus(ctx, west, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("west's status write: %v", err)
	}
	// East's mapper reflects the status of its target copy.
	copyOf := env.targetObject(t, ctx, "east", deploymentsGVR, "restart", "d")
	copyOf.Object["status"] = map[string]interface{}{"observedGeneration": copyOf.GetGeneration(), "replicas": int64(1)}
	if _, err := env.tgt["east"].Resource(deploymentsGVR).Namespace("restart").UpdateStatus(ctx, copyOf, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var before *unstructured.Unstructured
	mapperEventually(t, ctx, 30*time.Second, "east's status record on the source", func() (bool, string) {
		src, err := env.src.Resource(deploymentsGVR).Namespace("restart").Get(ctx, "d", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		_, has := src.GetAnnotations()[contract.StatusRecordAnnotationPrefix+"east"]
		if !has {
			return false, "no record of east yet"
		}
		before, err = views["east"].Resource(deploymentsGVR).Namespace("restart").Get(ctx, "d", metav1.GetOptions{})
		return err == nil && before.GetResourceVersion() == src.GetResourceVersion(), "east's view is not at east's write yet"
	})
	src, _ := env.src.Resource(deploymentsGVR).Namespace("restart").Get(ctx, "d", metav1.GetOptions{})
	t.Logf("before the restart east's view shows resourceVersion %s, generation %d; the source's generation is %d",
		before.GetResourceVersion(), before.GetGeneration(), src.GetGeneration())
	if before.GetGeneration() == src.GetGeneration() {
		t.Fatalf("east's view shows the source's generation %d: the status records did not move it, the test proves nothing", src.GetGeneration())
	}
	mapperEventually(t, ctx, 30*time.Second, "east's copy stamped with east's view generation", func() (bool, string) {
		got := stampedGeneration(t, ctx, env)
		return got == before.GetGeneration(), "stamped " + strconv.FormatInt(got, 10)
	})

	env.server.Restart(t)

	start := time.Now()
	var now *unstructured.Unstructured
	mapperEventually(t, ctx, 45*time.Second, "east's copy stamped with the generation east's view shows after the restart", func() (bool, string) {
		var err error
		now, err = views["east"].Resource(deploymentsGVR).Namespace("restart").Get(ctx, "d", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := stampedGeneration(t, ctx, env)
		return got == now.GetGeneration(), "stamped " + strconv.FormatInt(got, 10) + ", view at resourceVersion " + now.GetResourceVersion() + " generation " + strconv.FormatInt(now.GetGeneration(), 10)
	})
	t.Logf("after the restart east's view shows resourceVersion %s, generation %d; the copy followed in %v",
		now.GetResourceVersion(), now.GetGeneration(), time.Since(start).Round(time.Millisecond))

	for _, loc := range []string{"east", "west"} {
		list, err := views[loc].Resource(deploymentsGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		shown.noteList(loc, list)
	}
	stopFollowing()
	shown.check(t)
}

// stampedGeneration returns kcp.io/source-generation of east's copy of restart/d (0 without).
func stampedGeneration(t *testing.T, ctx context.Context, env *mapperEnv) int64 {
	t.Helper()
	c := env.targetObject(t, ctx, "east", deploymentsGVR, "restart", "d")
	if c == nil {
		return 0
	}
	g, _ := strconv.ParseInt(c.GetAnnotations()[contract.SourceGenerationAnnotation], 10, 64)
	return g
}

// dynamicClientForConfig returns a dynamic client of cfg, failing the test on error.
func dynamicClientForConfig(t *testing.T, cfg *rest.Config) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
