package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// identityForger is an HTTP proxy in front of a source's API server (and so of its location
// views, through the aggregator) that shows chosen objects under another namespace and name in
// every JSON answer: objects, lists and each watch frame, as a mapper-apiserver whose rendering
// check failed would. It forwards everything else as it is, with the credentials of upstream.
// It is the stand-in for a broken first line of defence, to test the mapper's second.
type identityForger struct {
	// upstream is the server's base URL, without a trailing slash.
	upstream string
	client   *http.Client
	// forge maps "namespace/name" of a real object to the identity it is shown under.
	forge map[string][2]string
}

// newIdentityForger starts the proxy for the server and credentials of cfg and returns its
// base URL (plain HTTP on loopback).
func newIdentityForger(t *testing.T, cfg *rest.Config, forge map[string][2]string) string {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&identityForger{upstream: strings.TrimSuffix(cfg.Host, "/"), client: client, forge: forge})
	t.Cleanup(srv.Close)
	return srv.URL
}

// ServeHTTP forwards r and rewrites the JSON values of the answer, flushing after each so that
// watches stream.
func (p *identityForger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	for k, vs := range r.Header {
		if k == "Authorization" || k == "Accept-Encoding" {
			continue
		}
		req.Header[k] = vs
	}
	resp, err := p.client.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		if k != "Content-Length" {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		_, _ = io.Copy(w, resp.Body)
		return
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	for {
		var v map[string]interface{}
		if err := dec.Decode(&v); err != nil {
			return
		}
		p.rewrite(v)
		if obj, ok := v["object"].(map[string]interface{}); ok {
			p.rewrite(obj) // a watch frame
		}
		if items, ok := v["items"].([]interface{}); ok {
			for _, item := range items {
				if m, ok := item.(map[string]interface{}); ok {
					p.rewrite(m)
				}
			}
		}
		b, _ := json.Marshal(v)
		_, _ = w.Write(append(b, '\n'))
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// rewrite gives obj its forged identity when it has one.
func (p *identityForger) rewrite(obj map[string]interface{}) {
	meta, _ := obj["metadata"].(map[string]interface{})
	ns, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	if to, ok := p.forge[ns+"/"+name]; ok {
		meta["namespace"], meta["name"] = to[0], to[1]
	}
}

// TestMapperRefusesForeignIdentity (docs/mapper.md, "Conflicts, failures, halted
// resources": the mapper's second line of defence): a view that shows tenant A's objects under
// another identity (as one whose rendering check failed would: here a proxy forges it) cannot
// make the mapper overwrite tenant B's copy nor plant an object in kube-system. The mapper
// refuses both,
// counts them in mapper_identity_refusals_total, and keeps mapping the rest; `mapper verify`
// through the same view reports the two objects under one identity.
func TestMapperRefusesForeignIdentity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	env := startLocationsEnv(t, ctx, "east")
	for _, ns := range []string{"tenant-a", "tenant-b"} {
		ensureNamespace(t, ctx, env.src, ns)
	}
	create := func(ns, name, owner string) *unstructured.Unstructured {
		u, err := env.src.Resource(configMapsGVR).Namespace(ns).Create(ctx, tenantConfigMap(ns, name, owner, "", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	create("tenant-b", "victim", "b")
	hijacker := create("tenant-a", "hijacker", "a")
	planter := create("tenant-a", "planter", "a")
	create("tenant-a", "plain", "a")

	// The mapper reads its view through the forging proxy, with its own credentials.
	forged := newIdentityForger(t, env.users["east"].RESTConfig(), map[string][2]string{
		"tenant-a/hijacker": {"tenant-b", "victim"},
		"tenant-a/planter":  {"kube-system", "planted"},
	})
	kubeconfig := filepath.Join(t.TempDir(), "forged-view")
	if err := framework.WriteKubeconfig(kubeconfig, &rest.Config{Host: forged + contract.ViewPath("east", "")}); err != nil {
		t.Fatal(err)
	}
	env.viewKubeconfig["east"] = kubeconfig
	east := env.startMapper(t, "mapper-east", "east", nil, locationMapperArgs...)

	// The view lists tenant-a before tenant-b, so the informer first holds the real victim
	// under its identity, and maps it.
	var victim *unstructured.Unstructured
	mapperEventually(t, ctx, 90*time.Second, "the victim's copy and the plain object on east", func() (bool, string) {
		victim = env.targetObject(t, ctx, "east", configMapsGVR, "tenant-b", "victim")
		plain := env.targetObject(t, ctx, "east", configMapsGVR, "tenant-a", "plain")
		return victim != nil && plain != nil, fmt.Sprintf("victim %v, plain %v", victim != nil, plain != nil)
	})
	refusals := func() float64 {
		v, _ := east.metric("mapper_identity_refusals_total", `resource="configmaps"`)
		return v
	}
	planted := func() *unstructured.Unstructured {
		return env.targetObject(t, ctx, "east", configMapsGVR, "kube-system", "planted")
	}
	victimOwner := func() string {
		v := env.targetObject(t, ctx, "east", configMapsGVR, "tenant-b", "victim")
		if v == nil {
			return ""
		}
		owner, _, _ := unstructured.NestedString(v.Object, "data", "owner")
		return owner
	}
	// Waits end when the mapper refused, or when it did what it must not (asserted below).
	mapperEventually(t, ctx, 60*time.Second, "the mapper handles the object forged into kube-system", func() (bool, string) {
		return refusals() >= 1 || planted() != nil, fmt.Sprintf("mapper_identity_refusals_total %v", refusals())
	})
	// A change of the hijacker is a watch event that puts it in the informer under the
	// victim's identity.
	before := refusals()
	env.mutate(t, ctx, configMapsGVR, "tenant-a", "hijacker", func(u *unstructured.Unstructured) {
		u.Object["data"] = map[string]interface{}{"owner": "a, again"}
	})
	mapperEventually(t, ctx, 60*time.Second, "the mapper handles the hijacker", func() (bool, string) {
		return refusals() > before || victimOwner() != "b", fmt.Sprintf("mapper_identity_refusals_total %v (before %v)", refusals(), before)
	})
	// Another object still maps: the mapper is not stuck.
	create("tenant-a", "after", "a")
	mapperEventually(t, ctx, 60*time.Second, "an object created afterwards on east", func() (bool, string) {
		return env.targetObject(t, ctx, "east", configMapsGVR, "tenant-a", "after") != nil, "absent"
	})

	now := env.targetObject(t, ctx, "east", configMapsGVR, "tenant-b", "victim")
	if now == nil {
		t.Fatal("the victim's copy is gone")
	}
	owner, _, _ := unstructured.NestedString(now.Object, "data", "owner")
	if owner != "b" || now.GetResourceVersion() != victim.GetResourceVersion() ||
		now.GetAnnotations()[contract.SourceUIDAnnotation] != victim.GetAnnotations()[contract.SourceUIDAnnotation] {
		t.Errorf("the victim's copy changed: owner %q, resourceVersion %s (was %s), source uid %s (hijacker %s)", owner,
			now.GetResourceVersion(), victim.GetResourceVersion(), now.GetAnnotations()[contract.SourceUIDAnnotation], hijacker.GetUID())
	}
	if p := planted(); p != nil {
		t.Errorf("the mapper planted %v in kube-system (source uid %s, planter %s)", p.GetName(), p.GetAnnotations()[contract.SourceUIDAnnotation], planter.GetUID())
	}
	if refusals() < 2 {
		t.Errorf("mapper_identity_refusals_total %v, want at least 2 (the planter and the hijacker)", refusals())
	}

	report := env.verifyOnce(t, "east")
	found := false
	for _, v := range report.Violations {
		if v.Invariant == 2 && strings.Contains(v.Message, "2 objects under this identity") && v.Source == "default|tenant-b/victim" {
			found = true
		}
	}
	if !found {
		t.Errorf("mapper verify through the forged view does not report the two objects under tenant-b/victim:\n%s", mapperReportText(report))
	}
}
