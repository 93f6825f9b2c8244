package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// TestSpecDiff: docs/design.md, "Per object, spec-diff.kcp.io/<location> (an RFC 6902 JSON patch) is
// applied by that location's view" and docs/customization.md's "failures never delete", on real
// servers with two mappers:
//   - east's view and east's target show east's patch applied, west's the object as it is, and
//     neither shows a spec-diff.kcp.io/ annotation;
//   - a patch that stops applying leaves east's view and target at the last rendering while
//     west follows the source;
//   - a new object whose patch fails is withheld from east (a GET through the view answers
//     503) and reaches east once the patch is fixed;
//   - after a restart of mapper-apiserver (which forgets the last rendering, so the failing
//     object is withheld from east), east's mapper tries to confirm the deletion through the
//     view, gets the 503 and keeps its copy; `mapper verify` reports the copy as kept, not as
//     an orphan.
func TestSpecDiff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := startLocationsEnv(t, ctx, "east", "west")
	ensureNamespace(t, ctx, env.src, "apps")
	const (
		east4  = `[{"op":"replace","path":"/data/replicas","value":"4"}]`
		broken = `[{"op":"test","path":"/data/replicas","value":"99"}]`
	)
	newPatched := func(name, replicas, eastPatch string) *unstructured.Unstructured {
		u := newConfigMap("apps", name, "east", "west")
		u.Object["data"] = map[string]interface{}{"replicas": replicas}
		ann := u.GetAnnotations()
		ann[contract.SpecDiffAnnotation("east")] = eastPatch
		u.SetAnnotations(ann)
		return u
	}
	if _, err := env.src.Resource(configMapsGVR).Namespace("apps").Create(ctx, newPatched("web", "10", east4), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	east := env.startMapper(t, "mapper-east", "east", nil, locationMapperArgs...)
	env.startMapper(t, "mapper-west", "west", nil, locationMapperArgs...)

	replicasOn := func(location, name string) (string, bool) {
		obj := env.targetObject(t, ctx, location, configMapsGVR, "apps", name)
		if obj == nil {
			return "", false
		}
		if k := specDiffAnnotation(obj); k != "" {
			t.Errorf("the copy of %s on %s carries %s", name, location, k)
		}
		r, _, _ := unstructured.NestedString(obj.Object, "data", "replicas")
		return r, true
	}
	waitReplicas := func(location, name, want string) {
		t.Helper()
		mapperEventually(t, ctx, 90*time.Second, fmt.Sprintf("%s's copy of %s has replicas %s", location, name, want), func() (bool, string) {
			r, ok := replicasOn(location, name)
			return ok && r == want, fmt.Sprintf("present %v, replicas %q", ok, r)
		})
	}
	eastView := viewClient(t, env.viewKubeconfig["east"])
	viewReplicas := func(name string) (string, error) {
		obj, err := eastView.Resource(configMapsGVR).Namespace("apps").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if k := specDiffAnnotation(obj); k != "" {
			t.Errorf("east's view of %s shows %s", name, k)
		}
		r, _, _ := unstructured.NestedString(obj.Object, "data", "replicas")
		return r, nil
	}

	t.Run("each location gets its own rendering", func(t *testing.T) {
		waitReplicas("east", "web", "4")
		waitReplicas("west", "web", "10")
		if r, err := viewReplicas("web"); err != nil || r != "4" {
			t.Errorf("east's view of web: replicas %q, err %v; want 4", r, err)
		}
		env.converge(t, ctx, "patched object", "east", "west")
	})

	failures := func() float64 {
		return env.server.Metric(t, env.source.Admin(), "mapper_apiserver_spec_diff_failures_total", `resource="configmaps"`)
	}
	t.Run("a patch that stops applying keeps the last rendering", func(t *testing.T) {
		before := failures()
		env.mutate(t, ctx, configMapsGVR, "apps", "web", func(u *unstructured.Unstructured) {
			u.Object["data"] = map[string]interface{}{"replicas": "12"}
			ann := u.GetAnnotations()
			ann[contract.SpecDiffAnnotation("east")] = broken
			u.SetAnnotations(ann)
		})
		waitReplicas("west", "web", "12")
		mapperEventually(t, ctx, 30*time.Second, "the server counts the failed patch", func() (bool, string) {
			v := failures()
			return v > before, fmt.Sprintf("mapper_apiserver_spec_diff_failures_total = %v (before %v)", v, before)
		})
		if r, err := viewReplicas("web"); err != nil || r != "4" {
			t.Errorf("east's view of web after its patch broke: replicas %q, err %v; want the last rendering, 4", r, err)
		}
		env.converge(t, ctx, "a broken patch", "east")
		if r, ok := replicasOn("east", "web"); !ok || r != "4" {
			t.Errorf("east's copy of web after its patch broke: present %v, replicas %q; want 4", ok, r)
		}
	})

	t.Run("a new object that never rendered is withheld, not deleted", func(t *testing.T) {
		if _, err := env.src.Resource(configMapsGVR).Namespace("apps").Create(ctx, newPatched("fresh", "10", broken), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitReplicas("west", "fresh", "10")
		_, err := viewReplicas("fresh")
		if !apierrors.IsServiceUnavailable(err) {
			t.Fatalf("GET of a withheld object through east's view: %v, want 503", err)
		}
		t.Logf("east's view answers: %v", err)
		env.converge(t, ctx, "a withheld object", "east")
		if _, ok := replicasOn("east", "fresh"); ok {
			t.Error("a withheld object reached east's target")
		}
		env.mutate(t, ctx, configMapsGVR, "apps", "fresh", func(u *unstructured.Unstructured) {
			ann := u.GetAnnotations()
			ann[contract.SpecDiffAnnotation("east")] = east4
			u.SetAnnotations(ann)
		})
		start := time.Now()
		waitReplicas("east", "fresh", "4")
		t.Logf("east got fresh %v after its patch was fixed", time.Since(start).Round(time.Millisecond))
	})

	t.Run("a restart of the server withholds the failing object and the mapper keeps its copy", func(t *testing.T) {
		start := time.Now()
		errorsBefore, _ := east.metric("mapper_errors_total", `resource="configmaps"`, `operation="delete"`)
		env.server.Restart(t)
		if _, err := viewReplicas("web"); !apierrors.IsServiceUnavailable(err) {
			t.Fatalf("GET of web through east's view after the restart: %v, want 503 (withheld)", err)
		}
		// The mapper's informer lost web; the mapper tries to confirm through the view that it
		// is gone, gets the 503, and counts a failed delete instead of deleting.
		mapperEventually(t, ctx, 90*time.Second, "east's mapper tries and fails to confirm web gone", func() (bool, string) {
			v, _ := east.metric("mapper_errors_total", `resource="configmaps"`, `operation="delete"`)
			return v > errorsBefore, fmt.Sprintf(`mapper_errors_total{operation="delete"} = %v (before %v)`, v, errorsBefore)
		})
		t.Logf("east's mapper failed to confirm the deletion %v after the restart began", time.Since(start).Round(time.Millisecond))
		if r, ok := replicasOn("east", "web"); !ok || r != "4" {
			t.Errorf("east's copy of web after the restart: present %v, replicas %q; want it kept at 4", ok, r)
		}
		waitReplicas("west", "web", "12")
		// `mapper verify` agrees: the view does not list web, but answers 503 for it, so the
		// copy is kept rightly, not an orphan (invariant 4).
		r := env.verifyOnce(t, "east", "--skip-content")
		kept := false
		for _, k := range r.Kept {
			kept = kept || (strings.HasSuffix(k.Source, "/web") && strings.Contains(k.Message, "withheld"))
		}
		if r.Count(4) != 0 || !kept {
			t.Errorf("mapper verify after the restart: %d orphans, web kept %v; want none and web kept (withheld):\n%s", r.Count(4), kept, mapperReportText(r))
		}
	})
}

// specDiffAnnotation returns a spec-diff.kcp.io/ annotation key of u, "" when it has none.
func specDiffAnnotation(u *unstructured.Unstructured) string {
	for k := range u.GetAnnotations() {
		if strings.HasPrefix(k, contract.SpecDiffAnnotationPrefix) {
			return k
		}
	}
	return ""
}

// viewClient returns a dynamic client for a view kubeconfig.
func viewClient(t *testing.T, kubeconfig string) dynamic.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
