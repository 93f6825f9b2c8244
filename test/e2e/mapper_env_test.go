package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/cluster-mapper/cluster-mapper/pkg/mapper/verify"
	"github.com/cluster-mapper/cluster-mapper/test/framework"
)

// mapperEnv is a source kube-apiserver, a mapper-apiserver mirroring it, and one target
// kube-apiserver per location, plus the mapper processes started on them.
type mapperEnv struct {
	source  *framework.ControlPlane
	server  *framework.MapperAPIServer
	targets map[string]*framework.ControlPlane
	src     dynamic.Interface
	tgt     map[string]dynamic.Interface
	// viewKubeconfig and targetKubeconfig are the files a location's mapper runs with.
	viewKubeconfig   map[string]string
	targetKubeconfig map[string]string
	bin              string
	// verifyArgs are added to every `mapper verify` (the mapper's own rules, e.g.
	// --namespace-mapping=prefixed).
	verifyArgs []string
	// owner is the test that owns the environment: processes (re)started by subtests are
	// registered with it, so that they outlive the subtest.
	owner *testing.T
}

// mapperResources are the resources mapper-apiserver mirrors in these tests.
const mapperResources = "configmaps,secrets,services,deployments.apps,widgets.example.com,gadgets.example.com"

// startMapperEnv starts the source, mapper-apiserver and one target per location (the
// targets share one etcd), and builds the mapper binary. The Widget CRD exists on the source
// and on every target.
func startMapperEnv(t *testing.T, ctx context.Context, locations ...string) *mapperEnv {
	t.Helper()
	opts := []framework.ControlPlaneOptions{{Name: "source"}}
	shared := framework.StartEtcd(t)
	for _, l := range locations {
		opts = append(opts, framework.ControlPlaneOptions{Name: "target-" + l, Etcd: shared})
	}
	cps := framework.StartControlPlanes(t, opts...)
	env := &mapperEnv{
		source: cps[0], targets: map[string]*framework.ControlPlane{}, tgt: map[string]dynamic.Interface{},
		viewKubeconfig: map[string]string{}, targetKubeconfig: map[string]string{},
		bin: framework.BuildBinary(t, "./cmd/mapper"), owner: t,
	}
	env.src = dynamicClientFor(t, env.source)
	createCRD(t, ctx, env.src, "widgets", "Widget")
	for i, l := range locations {
		env.targets[l] = cps[i+1]
		env.tgt[l] = dynamicClientFor(t, cps[i+1])
		createCRD(t, ctx, env.tgt[l], "widgets", "Widget")
		env.targetKubeconfig[l] = cps[i+1].AdminKubeconfig()
	}
	env.server = framework.StartMapperAPIServer(t, env.source,
		"--resources="+mapperResources,
		"--source-discovery-interval=1s",
		"--bookmark-interval=1s",
		"--deletion-event-delay=1s",
	)
	for _, l := range locations {
		env.viewKubeconfig[l] = env.source.Admin().KubeconfigFor(t, env.server.ViewURL(l), env.server.ServingCA.CertPEM)
	}
	return env
}

// dynamicClientFor returns an admin dynamic client of cp without client-side throttling.
func dynamicClientFor(t *testing.T, cp *framework.ControlPlane) dynamic.Interface {
	t.Helper()
	cfg := cp.AdminConfig()
	cfg.QPS = -1
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// mapperProc is one mapper replica: a process that can be killed and started again with the
// same command line.
type mapperProc struct {
	name        string
	location    string
	args        []string
	envVars     []string
	metricsAddr string
	proc        *framework.Process
	owner       *testing.T
}

// mapperLogDirEnv names a directory that keeps the mapper logs of the tests (by default they
// go to the test's temporary directory and are removed with it).
const mapperLogDirEnv = framework.LogDirEnv

// mapperTestArgs are the timings of mappers in tests: fast discovery and sweeps, short
// backoff, and short leases so that a killed leader is replaced within seconds.
var mapperTestArgs = []string{
	"--discovery-interval=1s",
	"--orphan-sweep-interval=3s",
	"--progress-interval=2s",
	"--max-retry-delay=3s",
	"--leader-elect=true",
	"--leader-elect-lease-duration=4s",
	"--leader-elect-renew-deadline=3s",
	"--leader-elect-retry-period=500ms",
	"--leader-elect-resource-namespace=default",
	"--target-qps=200",
	"--target-burst=400",
	"-v=2",
}

// startMapper starts a mapper replica for location with mapperTestArgs plus extraArgs; envVars
// are added to its environment (e.g. KUBE_FEATURE_WatchListClient=false).
func (e *mapperEnv) startMapper(t *testing.T, name, location string, envVars []string, extraArgs ...string) *mapperProc {
	t.Helper()
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	m := &mapperProc{name: name, location: location, envVars: envVars, metricsAddr: fmt.Sprintf("127.0.0.1:%d", port), owner: e.owner}
	m.args = append([]string{
		"--view-kubeconfig=" + e.viewKubeconfig[location],
		"--target-kubeconfig=" + e.targetKubeconfig[location],
		"--location=" + location,
		"--metrics-bind-address=" + m.metricsAddr,
	}, mapperTestArgs...)
	m.args = append(m.args, extraArgs...)
	m.start(e.bin)
	return m
}

// start starts the process; it is registered with the environment's owner test.
func (m *mapperProc) start(bin string) {
	m.owner.Helper()
	m.proc = framework.StartProcess(m.owner, framework.ProcessSpec{Name: m.name, Path: bin, Args: m.args, Env: m.envVars, LogDir: os.Getenv(mapperLogDirEnv)})
}

// restart starts the replica again after it was stopped or killed.
func (m *mapperProc) restart() { m.start(m.proc.Args[0]) }

// afterTargetOutage runs once the replica's target, whose kube-apiserver holds its
// leader-election Lease (default/cluster-mapper-<location>), is back since cameBack: it waits
// until the replica either renewed that Lease after cameBack, or exited ("lost the leader
// lease", as Kubernetes controllers do after their renew deadline), which it then starts again
// as its Deployment would. One look at Running right after the target came back is not
// enough: a renewal that failed during the outage makes the replica exit up to its renew
// deadline later.
func (m *mapperProc) afterTargetOutage(t *testing.T, ctx context.Context, target *framework.ControlPlane, cameBack time.Time) {
	t.Helper()
	client, err := kubernetes.NewForConfig(target.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if !m.proc.Running() {
			t.Logf("%s exited during its target's outage (%v); starting it again as its Deployment would", m.name, m.proc.ExitError())
			m.restart()
			return true, nil
		}
		lease, err := client.CoordinationV1().Leases("default").Get(ctx, "cluster-mapper-"+m.location, metav1.GetOptions{})
		if err != nil {
			return false, nil // the target may still be answering slowly
		}
		renewed := lease.Spec.RenewTime
		return renewed != nil && renewed.After(cameBack), nil
	})
	if err != nil {
		t.Fatalf("%s neither renewed its Lease nor exited after its target came back: %v\n%s", m.name, err, m.proc.LogTail(30))
	}
}

// metric returns the value of the sample of metric name whose labels include all of labels
// (as `k="v"` strings) on the replica's /metrics, and whether it was found.
func (m *mapperProc) metric(name string, labels ...string) (float64, bool) {
	v := m.samples(name, labels, true)
	if len(v) == 0 {
		return 0, false
	}
	return v[0], true
}

// metricTotal returns the sum of every sample of metric name whose labels include all of
// labels on the replica's /metrics (0 when there is none).
func (m *mapperProc) metricTotal(name string, labels ...string) float64 {
	total := 0.0
	for _, v := range m.samples(name, labels, false) {
		total += v
	}
	return total
}

// samples returns the values of the samples of metric name whose labels include all of labels
// on the replica's /metrics; only the first when first is set.
func (m *mapperProc) samples(name string, labels []string, first bool) []float64 {
	resp, err := http.Get("http://" + m.metricsAddr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var out []float64
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err == nil {
			out = append(out, v)
			if first {
				return out
			}
		}
	}
	return out
}

// ready reports whether the replica's /readyz answers 200.
func (m *mapperProc) ready() bool {
	resp, err := http.Get("http://" + m.metricsAddr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// verifyOnce runs `mapper verify -o json` for location and returns its report. It fails the
// test when verify cannot compare (an error other than "N violations").
func (e *mapperEnv) verifyOnce(t *testing.T, location string, extraArgs ...string) *verify.Report {
	t.Helper()
	args := append([]string{"verify", "-o", "json",
		"--view-kubeconfig=" + e.viewKubeconfig[location],
		"--target-kubeconfig=" + e.targetKubeconfig[location],
		"--target-qps=500", "--target-burst=1000",
	}, append(append([]string{}, e.verifyArgs...), extraArgs...)...)
	cmd := exec.Command(e.bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running mapper verify: %v", err)
	}
	report := &verify.Report{}
	if jerr := json.Unmarshal(stdout.Bytes(), report); jerr != nil {
		t.Fatalf("mapper verify for %s failed (%v): %s\n%s", location, err, stderr.String(), stdout.String())
	}
	if (report.Total == 0) != (err == nil) {
		t.Errorf("mapper verify exit status %v does not match its %d violations", err, report.Total)
	}
	return report
}

// mapperReportText renders a report for a failure message.
func mapperReportText(r *verify.Report) string {
	var b bytes.Buffer
	_ = r.WriteText(&b)
	return b.String()
}

// mapperConvergeTimeout bounds how long a step may take to converge.
const mapperConvergeTimeout = 90 * time.Second

// converge polls `mapper verify` for each location until it reports no violations, and fails
// the test with the last report otherwise.
func (e *mapperEnv) converge(t *testing.T, ctx context.Context, step string, locations ...string) {
	t.Helper()
	start := time.Now()
	for _, l := range locations {
		var last *verify.Report
		err := wait.PollUntilContextTimeout(ctx, time.Second, mapperConvergeTimeout, true, func(ctx context.Context) (bool, error) {
			last = e.verifyOnce(t, l)
			return last.Total == 0, nil
		})
		if err != nil {
			t.Fatalf("after %s, %s did not converge in %v:\n%s", step, l, mapperConvergeTimeout, mapperReportText(last))
		}
	}
	t.Logf("%s: converged (%v) in %v", step, locations, time.Since(start).Round(time.Millisecond))
}

// mutate reads a source object, applies change and writes it back, retrying on conflicts.
func (e *mapperEnv) mutate(t *testing.T, ctx context.Context, gvr schema.GroupVersionResource, ns, name string, change func(*unstructured.Unstructured)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := e.src.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(obj)
		_, err = e.src.Resource(gvr).Namespace(ns).Update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("updating source %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
}

// targetObject reads ns/name of gvr on location's target; nil when it does not exist.
func (e *mapperEnv) targetObject(t *testing.T, ctx context.Context, location string, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := e.tgt[location].Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("reading %s %s/%s on the target of %s: %v", gvr.Resource, ns, name, location, err)
	}
	return obj
}

// mapperEventually polls cond every 200ms until it returns true, and fails the test with its last
// message after timeout.
func mapperEventually(t *testing.T, ctx context.Context, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	var msg string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var ok bool
		ok, msg = cond()
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %v: %s", what, timeout, msg)
	}
}

// mapperSortedKeys returns the first n keys of s in order.
func mapperSortedKeys(s sets.Set[string], n int) []string {
	l := sets.List(s)
	if len(l) > n {
		l = l[:n]
	}
	return l
}

// mapperSplitKey splits "namespace/name".
func mapperSplitKey(k string) (string, string) {
	ns, name, _ := strings.Cut(k, "/")
	return ns, name
}
