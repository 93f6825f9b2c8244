package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// TestUnsyncedResourceGate on the real control plane.
//
// mapper-apiserver runs with a source identity that may read ConfigMaps but not the CRD
// "gates.example.com", which is created, with objects, while the server runs. The server
// stays ready (item 2: a resource it cannot list blocks nothing else), reports the refusal in
// mapper_apiserver_source_list_errors_total{reason="Forbidden"}, keeps serving ConfigMaps, and
// answers reads of the CRD with 429 and a Retry-After (item 1) — never an empty list. Then the
// identity is granted the CRD: the view shows every object. A reader polls the CRD's view all
// along and must never get a 200 with fewer than all objects.
func TestUnsyncedResourceGate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	source, src := startSource(t)
	admin := source.Admin().Client(t)
	const ns = "gate"
	ensureNamespace(t, ctx, src, ns)
	if _, err := src.Resource(configMapsGVR).Namespace(ns).Create(ctx, newConfigMap(ns, "cm", "east"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The server's source identity: ConfigMaps yes, gates.example.com only once granted.
	limited := source.NewUser(t, "mapper-apiserver-limited")
	grant := func(name string, rules ...rbacv1.PolicyRule) {
		t.Helper()
		if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "mapper-apiserver-limited"}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	grant("gate-configmaps", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps", "configmaps/status"}, Verbs: []string{"get", "list", "watch", "update", "patch"}})
	server := framework.StartMapperAPIServer(t, source,
		"--source-kubeconfig="+limited.KubeconfigPath,
		"--resources=configmaps,gates.example.com",
		"--source-discovery-interval=1s",
	)
	view, err := dynamic.NewForConfig(server.ViewConfig(source.Admin(), "east"))
	if err != nil {
		t.Fatal(err)
	}

	// The CRD appears, with objects, while the server runs.
	const n = 200
	gatesGVR := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gates"}
	createCRD(t, ctx, src, "gates", "Gate")
	for i := 0; i < n; i++ {
		if _, err := src.Resource(gatesGVR).Namespace(ns).Create(ctx, newWidget(gatesGVR, "Gate", ns, fmt.Sprintf("gate-%03d", i), "east"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// A reader races the first sync from now on: any 200 must hold all n objects.
	var (
		mu       sync.Mutex
		answers  = map[string]int{}
		bad      []string
		readerWG sync.WaitGroup
	)
	readerCtx, stopReader := context.WithCancel(ctx)
	readerWG.Add(1)
	go func() {
		defer readerWG.Done()
		for readerCtx.Err() == nil {
			// Raw requests: client-go would retry a 429 by itself and hide it.
			for _, rv := range []string{"", "0"} {
				a := rawViewGet(t, server, source, "/apis/example.com/v1/namespaces/"+ns+"/gates?resourceVersion="+rv)
				mu.Lock()
				switch {
				case a.code == http.StatusOK:
					var list struct {
						Items []json.RawMessage `json:"items"`
					}
					if err := json.Unmarshal([]byte(a.full), &list); err != nil || len(list.Items) != n {
						bad = append(bad, fmt.Sprintf("200 with %d of %d items (resourceVersion %q, %v)", len(list.Items), n, rv, err))
					} else {
						answers["200 complete"]++
					}
				case a.code == http.StatusNotFound:
					answers["404 not discovered yet"]++
				case a.code == http.StatusTooManyRequests && a.retryAfter != "":
					answers["429"]++
				default:
					bad = append(bad, fmt.Sprintf("unexpected answer %d Retry-After=%q: %.300s", a.code, a.retryAfter, a.body))
				}
				mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	// The refusal is reported, the server stays ready, ConfigMaps are served, and a read of the
	// CRD is a 429 with a Retry-After.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return server.Metric(t, source.Admin(), "mapper_apiserver_source_list_errors_total", `reason="Forbidden",resource="gates.example.com"`) > 0, nil
	}); err != nil {
		t.Fatalf("the forbidden list of gates.example.com was not counted: %v", err)
	}
	readyz(t, server, source)
	if list, err := view.Resource(configMapsGVR).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 1 {
		t.Fatalf("configmaps while gates are forbidden: %v", err)
	}
	raw := rawViewGet(t, server, source, "/apis/example.com/v1/namespaces/"+ns+"/gates")
	if raw.code != http.StatusTooManyRequests || raw.retryAfter == "" {
		t.Fatalf("a list of the unsynced resource: %d Retry-After=%q %s", raw.code, raw.retryAfter, raw.body)
	}
	if !strings.Contains(raw.body, "forbidden") {
		t.Errorf("the 429 does not say why the resource is not synced: %s", raw.body)
	}
	t.Logf("while forbidden: %d Retry-After %s: %.200s", raw.code, raw.retryAfter, raw.body)

	// Granted: the first sync completes and the view shows every object.
	grant("gate-gates", rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"gates", "gates/status"}, Verbs: []string{"get", "list", "watch", "update", "patch"}})
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return answers["200 complete"] >= 3, nil
	}); err != nil {
		t.Fatalf("the view never showed the %d objects after the grant", n)
	}
	stopReader()
	readerWG.Wait()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("reader's answers: %v", answers)
	if answers["429"] == 0 {
		t.Errorf("the reader never saw the resource unsynced (429): the race was not exercised")
	}
	if len(bad) > 0 {
		t.Fatalf("reads of the unsynced resource got %d wrong answers, e.g. %v", len(bad), bad[:min(len(bad), 5)])
	}
}

// rawAnswer is an HTTP answer of the server.
type rawAnswer struct {
	code       int
	retryAfter string
	// body is the start of the body (4 KiB), full all of it.
	body, full string
}

// rawViewGet GETs path inside east's view as the source admin, without client-go's retries
// (client-go retries a 429 with Retry-After by itself).
func rawViewGet(t *testing.T, server *framework.MapperAPIServer, source *framework.ControlPlane, path string) rawAnswer {
	t.Helper()
	client, err := rest.HTTPClientFor(server.Config(source.Admin()))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(server.ViewURL("east") + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("reading %s: %v", path, err)
	}
	return rawAnswer{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: string(b[:min(len(b), 4096)]), full: string(b)}
}

// readyz fails the test unless the server's /readyz answers 200.
func readyz(t *testing.T, server *framework.MapperAPIServer, source *framework.ControlPlane) {
	t.Helper()
	client, err := rest.HTTPClientFor(server.Config(source.Admin()))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(server.URL + "/readyz?verbose")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b := make([]byte, 4096)
		n, _ := resp.Body.Read(b)
		t.Fatal(errors.New("readyz: " + resp.Status + ": " + string(b[:n])))
	}
}
