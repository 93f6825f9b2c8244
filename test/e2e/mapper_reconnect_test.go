package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// reconnectOutage is how long TestMapperResumesAfterDisconnect keeps the mapper cut off from
// its view.
const reconnectOutage = 20 * time.Second

// TestMapperResumesAfterDisconnect is intermittent connectivity from the edge's
// side: the connection between a pull mapper (and its target) and the center (its view on
// mapper-apiserver) is cut for 20 s while the source deletes, changes and creates objects.
// When the connection is back, the mapper resumes its view watch from the resourceVersion it
// had reached, without listing its view again, and catches up: 0 violations, and every
// surviving object keeps its target UID.
//
// The resume is read from mapper-apiserver's request log (-v=3, k8s.io/apiserver's httplog,
// which logs a request when it ends): the mapper's first list of its view is there (the
// control that such lines are logged), and after the cut there is no list of the view's
// configmaps, only watches, which end in the log when the connection is cut.
func TestMapperResumesAfterDisconnect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	shared := framework.StartEtcd(t)
	cps := framework.StartControlPlanes(t, framework.ControlPlaneOptions{Name: "source"}, framework.ControlPlaneOptions{Name: "target-east", Etcd: shared})
	env := &mapperEnv{
		source: cps[0], targets: map[string]*framework.ControlPlane{"east": cps[1]},
		tgt:            map[string]dynamic.Interface{"east": dynamicClientFor(t, cps[1])},
		viewKubeconfig: map[string]string{}, targetKubeconfig: map[string]string{"east": cps[1].AdminKubeconfig()},
		bin: framework.BuildBinary(t, "./cmd/mapper"), owner: t,
	}
	env.src = dynamicClientFor(t, env.source)
	const ns, objects = "apps", 10
	name := func(i int) string { return fmt.Sprintf("cm-%02d", i) }
	ensureNamespace(t, ctx, env.src, ns)
	for i := 0; i < objects; i++ {
		if _, err := env.src.Resource(configMapsGVR).Namespace(ns).Create(ctx, newConfigMap(ns, name(i), "east"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	env.server = framework.StartMapperAPIServer(t, env.source, "--resources=configmaps", "--bookmark-interval=1s", "-v=3")
	defer func() { _ = env.server.Process.Stop() }()
	serverURL, err := url.Parse(env.server.URL)
	if err != nil {
		t.Fatal(err)
	}
	// The edge's link to the center: the mapper reaches its view through a proxy the test cuts.
	link := framework.StartTCPProxy(t, serverURL.Host)
	env.viewKubeconfig["east"] = env.source.Admin().KubeconfigFor(t, "https://"+link.Addr+contract.ViewPath("east", ""), env.server.ServingCA.CertPEM)

	mapper := env.startMapper(t, "mapper-east", "east", nil)
	env.converge(t, ctx, "initial sync", "east")
	uids := map[string]types.UID{}
	for i := 0; i < objects; i++ {
		uids[name(i)] = env.targetObject(t, ctx, "east", configMapsGVR, ns, name(i)).GetUID()
	}
	viewList := contract.ViewPath("east", "") + "/api/v1/configmaps?"
	if n := viewRequests(t, env.server, 0, viewList, false); n == 0 {
		t.Fatalf("mapper-apiserver's log shows no list of %s before the cut; the request log (-v=3) does not show what this test reads", viewList)
	}
	logOffset := logSize(t, env.server)

	link.Cut()
	cut := time.Now()
	for i := 0; i < 2; i++ {
		if err := env.src.Resource(configMapsGVR).Namespace(ns).Delete(ctx, name(i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 2; i < 4; i++ {
		env.mutate(t, ctx, configMapsGVR, ns, name(i), func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "changed while cut off", "data", "key")
		})
	}
	for i := objects; i < objects+2; i++ {
		if _, err := env.src.Resource(configMapsGVR).Namespace(ns).Create(ctx, newConfigMap(ns, name(i), "east"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-time.After(time.Until(cut.Add(reconnectOutage))):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if !mapper.proc.Running() {
		t.Fatalf("the mapper exited while cut off from its view:\n%s", mapper.proc.LogTail(30))
	}
	link.Restore()
	env.converge(t, ctx, "after the link came back", "east")

	for i := 2; i < objects; i++ {
		obj := env.targetObject(t, ctx, "east", configMapsGVR, ns, name(i))
		if obj == nil || obj.GetUID() != uids[name(i)] {
			t.Fatalf("%s on the target after the cut: %v, want the object with UID %s", name(i), obj, uids[name(i)])
		}
	}
	if n := viewRequests(t, env.server, logOffset, viewList, false); n != 0 {
		t.Errorf("the mapper listed its view %d times after the link came back, want a resumed watch and no list", n)
	}
	if n := viewRequests(t, env.server, logOffset, viewList, true); n == 0 {
		t.Errorf("mapper-apiserver's log shows no view watch ended by the cut")
	}
	t.Logf("the mapper caught up after a %v cut by resuming its watch (no list of its view)", reconnectOutage)
}

// logSize returns the current size of the server's log file in bytes.
func logSize(t *testing.T, server *framework.MapperAPIServer) int64 {
	t.Helper()
	fi, err := os.Stat(server.Process.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// mapperUserAgent is how the mapper's own requests appear in the request log (`mapper verify`,
// which the test runs to check convergence, lists the view as cluster-mapper/mapper-verify).
const mapperUserAgent = `userAgent="cluster-mapper/mapper"`

// viewRequests counts the request-log lines ("HTTP", k8s.io/apiserver's httplog) of the
// server after byte offset made by the mapper (mapperUserAgent) whose URI starts with
// uriPrefix and that are watches (watch=true in the URI) or not, as watches says.
func viewRequests(t *testing.T, server *framework.MapperAPIServer, offset int64, uriPrefix string, watches bool) int {
	t.Helper()
	data, err := os.ReadFile(server.Process.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data[offset:]), "\n") {
		if !strings.Contains(line, `"HTTP"`) || !strings.Contains(line, `URI="`+uriPrefix) || !strings.Contains(line, mapperUserAgent) {
			continue
		}
		if strings.Contains(line, "watch=true") == watches {
			n++
		}
	}
	return n
}
