package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// answer is the status code and Status message of one raw request.
type answer struct {
	code int
	msg  string
}

func probeGet(ctx context.Context, c rest.Interface, path string, params map[string]string) answer {
	req := c.Get().AbsPath(path)
	for k, v := range params {
		req = req.Param(k, v)
	}
	var code int
	err := req.Do(ctx).StatusCode(&code).Error()
	a := answer{code: code}
	if err != nil {
		a.msg = err.Error()
	}
	return a
}

func restClient(t *testing.T, cfg *rest.Config) rest.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c.CoreV1().RESTClient()
}

// TestViewErrorCodes: a view answers bad requests as kube-apiserver answers the same requests
// (docs/views.md, "Errors"), and a 503 only ever means that the source cannot be reached. A status
// write's fieldValidation is answered as kube-apiserver answers it: Strict refuses an unknown
// field, Warn warns of it in the same words (fails without source.RelayWarnings: no Warning
// header), Ignore says nothing.
func TestViewErrorCodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	source, src := startSource(t)
	ensureNamespace(t, ctx, src, "apps")
	env := &viewEnv{source: source, src: src, views: map[string]dynamic.Interface{}}
	env.create(t, ctx, configMapsGVR, newConfigMap("apps", "first", "east"))
	env.create(t, ctx, deploymentsGVR, reflectStatus(newDeployment("apps", "solo", "east")))
	env.create(t, ctx, deploymentsGVR, reflectStatus(newDeployment("apps", "shared", "east", "west")))
	env.server = framework.StartMapperAPIServer(t, source, "--resources=configmaps,deployments.apps", "--source-discovery-interval=1s")
	env.connectViews(t, "east")
	direct := restClient(t, source.AdminConfig())
	view := restClient(t, env.server.ViewConfig(source.Admin(), "east"))

	// The same requests to kube-apiserver and to the view.
	probes := []struct {
		name   string
		path   string
		params map[string]string
	}{
		{"name with %", "/api/v1/namespaces/apps/configmaps/a%b", nil},
		{"namespace with %", "/api/v1/namespaces/a%b/configmaps/first", nil},
		{"list in a namespace with %", "/api/v1/namespaces/a%b/configmaps", nil},
		{"watch with timeoutSeconds=-5", "/api/v1/namespaces/apps/configmaps", map[string]string{"watch": "true", "timeoutSeconds": "-5"}},
		{"consistent watch with timeoutSeconds=-5", "/api/v1/configmaps", map[string]string{"watch": "true", "timeoutSeconds": "-5", "sendInitialEvents": "true", "allowWatchBookmarks": "true", "resourceVersionMatch": "NotOlderThan"}},
	}
	for _, p := range probes {
		want := probeGet(ctx, direct, p.path, p.params)
		got := probeGet(ctx, view, p.path, p.params)
		t.Logf("%s: kube-apiserver %d %q, view %d %q", p.name, want.code, want.msg, got.code, got.msg)
		if got.code == 503 {
			t.Errorf("%s: the view answers 503 (%s) although the source is reachable", p.name, got.msg)
		}
		if got.code != want.code {
			t.Errorf("%s: the view answers %d (%s), kube-apiserver %d (%s)", p.name, got.code, got.msg, want.code, want.msg)
		}
	}

	// An old resourceVersion with resourceVersionMatch=Exact is 410 about the resourceVersion,
	// not about a continue parameter nobody sent.
	first, err := env.views["east"].Resource(configMapsGVR).Namespace("apps").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		env.update(t, ctx, configMapsGVR, "apps", "first", func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"n": string(rune('a' + i))}) })
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		u, err := env.views["east"].Resource(configMapsGVR).Namespace("apps").Get(ctx, "first", metav1.GetOptions{})
		return err == nil && u.GetLabels()["n"] == "c", nil
	})
	if err != nil {
		t.Fatalf("the view does not show the last change: %v", err)
	}
	_, err = env.views["east"].Resource(configMapsGVR).Namespace("apps").List(ctx, metav1.ListOptions{ResourceVersion: first.GetResourceVersion(), ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Errorf("Exact list at an old resourceVersion: want 410, got %v", err)
	} else if strings.Contains(err.Error(), "continue") {
		t.Errorf("Exact list at an old resourceVersion blames a continue parameter: %v", err)
	}

	// fieldValidation=Strict on a status write: the same answer as kube-apiserver gives to the
	// same write of the source's /status (a PATCH: 422 on the field "patch"; a PUT: 400), with
	// the strict decoding error, and nothing reaches the source.
	bogus, _ := json.Marshal(map[string]interface{}{"status": map[string]interface{}{"bogusField": 1}})
	_, wantPatch := src.Resource(deploymentsGVR).Namespace("apps").Patch(ctx, "solo", types.MergePatchType, bogus, metav1.PatchOptions{FieldValidation: "Strict"}, "status")
	srcObj, err := src.Resource(deploymentsGVR).Namespace("apps").Get(ctx, "solo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srcObj.Object["status"] = map[string]interface{}{"bogusField": int64(1)}
	_, wantPut := src.Resource(deploymentsGVR).Namespace("apps").UpdateStatus(ctx, srcObj, metav1.UpdateOptions{FieldValidation: "Strict"})
	t.Logf("kube-apiserver: Strict PATCH %d %v; Strict PUT %d %v", code(wantPatch), wantPatch, code(wantPut), wantPut)
	if code(wantPatch) < 400 || code(wantPut) < 400 {
		t.Fatalf("kube-apiserver accepted a Strict status write with an unknown field")
	}
	for _, name := range []string{"solo", "shared"} {
		c := env.views["east"].Resource(deploymentsGVR).Namespace("apps")
		var patchErr, putErr error
		_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			_, patchErr = c.Patch(ctx, name, types.MergePatchType, bogus, metav1.PatchOptions{FieldValidation: "Strict"}, "status")
			return patchErr
		})
		_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			obj, err := c.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			obj.Object["status"] = map[string]interface{}{"bogusField": int64(1)}
			_, putErr = c.UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldValidation: "Strict"})
			return putErr
		})
		t.Logf("view of %s: Strict PATCH %d %v; Strict PUT %d %v", name, code(patchErr), patchErr, code(putErr), putErr)
		if code(patchErr) != code(wantPatch) || !strings.Contains(fmt.Sprint(patchErr), `unknown field "status.bogusField"`) {
			t.Errorf("Strict status PATCH of %s through the view: want %d with the strict decoding error, got %v", name, code(wantPatch), patchErr)
		}
		if code(putErr) != code(wantPut) || !strings.Contains(fmt.Sprint(putErr), `unknown field "status.bogusField"`) {
			t.Errorf("Strict status PUT of %s through the view: want %d with the strict decoding error, got %v", name, code(wantPut), putErr)
		}
		obj, err := src.Resource(deploymentsGVR).Namespace("apps").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if raw, _ := json.Marshal(obj.Object); strings.Contains(string(raw), "bogusField") {
			t.Errorf("the refused Strict write reached the source object %s", name)
		}
	}

	// fieldValidation=Warn: the write succeeds with the warnings kube-apiserver gives for the
	// same write of the source's /status, and, as there, the unknown field is dropped (also from
	// a status kept as a record); Ignore: no warning.
	directWarnings, viewWarnings := &warningCollector{}, &warningCollector{}
	directCfg := source.AdminConfig()
	directCfg.WarningHandler = directWarnings
	srcWarn, err := dynamic.NewForConfig(directCfg)
	if err != nil {
		t.Fatal(err)
	}
	viewCfg := env.server.ViewConfig(source.Admin(), "east")
	viewCfg.WarningHandler = viewWarnings
	viewWarn, err := dynamic.NewForConfig(viewCfg)
	if err != nil {
		t.Fatal(err)
	}
	putWith := func(c dynamic.ResourceInterface, name, validation string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			obj, err := c.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			obj.Object["status"] = map[string]interface{}{"bogusField": int64(2), "replicas": int64(1)}
			_, err = c.UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldValidation: validation})
			return err
		})
	}
	patchWith := func(c dynamic.ResourceInterface, name, validation string) error {
		_, err := c.Patch(ctx, name, types.MergePatchType, bogus, metav1.PatchOptions{FieldValidation: validation}, "status")
		return err
	}
	for _, w := range []struct {
		what  string
		write func(dynamic.ResourceInterface, string, string) error
	}{{"PUT", putWith}, {"PATCH", patchWith}} {
		if err := w.write(srcWarn.Resource(deploymentsGVR).Namespace("apps"), "solo", "Warn"); err != nil {
			t.Fatalf("kube-apiserver: Warn status %s: %v", w.what, err)
		}
		want := directWarnings.take()
		t.Logf("kube-apiserver: Warn status %s warns %q", w.what, want)
		if len(want) == 0 {
			t.Fatalf("kube-apiserver gave no warning for a Warn status %s with an unknown field", w.what)
		}
		for _, name := range []string{"solo", "shared"} {
			if err := w.write(viewWarn.Resource(deploymentsGVR).Namespace("apps"), name, "Warn"); err != nil {
				t.Errorf("Warn status %s of %s through the view: %v", w.what, name, err)
				continue
			}
			if got := viewWarnings.take(); !reflect.DeepEqual(got, want) {
				t.Errorf("Warn status %s of %s through the view warns %q, kube-apiserver %q", w.what, name, got, want)
			}
		}
	}
	shared, err := src.Resource(deploymentsGVR).Namespace("apps").Get(ctx, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if record := shared.GetAnnotations()[contract.StatusRecordAnnotationPrefix+"east"]; record == "" || strings.Contains(record, "bogusField") {
		t.Errorf("east's record after Warn writes: %q, want one without the unknown field", record)
	}
	for _, name := range []string{"solo", "shared"} {
		if err := putWith(viewWarn.Resource(deploymentsGVR).Namespace("apps"), name, "Ignore"); err != nil {
			t.Errorf("Ignore status PUT of %s through the view: %v", name, err)
		}
		if got := viewWarnings.take(); len(got) > 0 {
			t.Errorf("Ignore status PUT of %s through the view warns %q", name, got)
		}
	}

	// A path that is no API path: the 404 says so, and does not start with an empty resource.
	nf := probeGet(ctx, view, "/clusters/Not_A_Cluster/api/v1/configmaps", nil)
	if nf.code != 404 || strings.HasPrefix(nf.msg, ` "`) || !strings.Contains(nf.msg, "could not find the requested resource") {
		t.Errorf("an inner path that is no API path: want 404 \"the server could not find the requested resource...\", got %d %q", nf.code, nf.msg)
	}

	// /version carries the build's version, not the placeholder of an unstamped build.
	dc, err := discovery.NewDiscoveryClientForConfig(env.server.Config(source.Admin()))
	if err != nil {
		t.Fatal(err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("/version: %s (%s, %s)", v.GitVersion, v.GitCommit, v.GitTreeState)
	if strings.Contains(v.GitVersion, "$Format") || strings.Contains(v.GitCommit, "$Format") || v.GitCommit == "" || v.GitVersion == "v0.0.0-master" {
		t.Errorf("/version is not stamped with the build's version: %+v", v)
	}
}

// warningCollector is a rest.WarningHandler that keeps the warnings a client gets.
type warningCollector struct {
	mu    sync.Mutex
	texts []string
}

func (w *warningCollector) HandleWarningHeader(code int, _, text string) {
	if code != 299 || text == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

// take returns the warnings collected since the last take, sorted.
func (w *warningCollector) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.texts
	w.texts = nil
	sort.Strings(out)
	return out
}

// code is the HTTP status code of an API error (0 for nil).
func code(err error) int {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return int(status.Status().Code)
	}
	return 0
}
