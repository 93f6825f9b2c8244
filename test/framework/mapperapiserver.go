package framework

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"k8s.io/client-go/rest"
)

// MapperAPIServerStartTimeout bounds how long [StartMapperAPIServer] waits for /readyz.
var MapperAPIServerStartTimeout = 90 * time.Second

// MapperAPIServer is a mapper-apiserver process started by [StartMapperAPIServer], mirroring a
// source control plane and delegating authentication and authorization to it.
type MapperAPIServer struct {
	// URL is the server's base URL (https://127.0.0.1:<port>).
	URL string
	// ServingCA signed the server's serving certificate.
	ServingCA *CA
	// Process is the running server.
	Process *Process
	// Source is the control plane it mirrors.
	Source *ControlPlane
	// ExtraArgs are the extra command-line arguments it was started with.
	ExtraArgs []string

	args []string
}

var (
	buildMu    sync.Mutex
	buildCache = map[string]string{}
	// buildDir is where BuildBinary writes; empty: binDir's per-process temporary directory.
	buildDir string
)

// SetBuildDir makes [BuildBinary] write its executables into dir (created when missing) instead
// of a temporary directory of this process: a program that keeps its binaries for its user (the
// demo writes bin/, as `make build` does) calls it before the first build. Binaries already
// built stay where they are.
func SetBuildDir(dir string) {
	buildMu.Lock()
	defer buildMu.Unlock()
	buildDir = dir
}

// BuildBinary builds the main package pkg of this module (e.g. "./cmd/mapper-apiserver", relative
// to the module root) once per test binary, with the version stamp of `make build`
// (hack/version-ldflags.sh), into a temporary directory of this process (or [SetBuildDir]'s), and
// returns the path of the executable. It fails the test with the
// compiler output on error.
func BuildBinary(t TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := buildCache[pkg]; ok {
		return p
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("building %s: %v", pkg, err)
	}
	dir := buildDir
	if dir == "" {
		dir, err = binDir()
	} else {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		t.Fatalf("building %s: %v", pkg, err)
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	// The version stamp of `make build` (k8s.io/component-base/version, from git describe).
	ldflags := exec.Command("bash", "hack/version-ldflags.sh")
	ldflags.Dir = root
	flags, err := ldflags.Output()
	if err != nil {
		t.Fatalf("hack/version-ldflags.sh: %v", err)
	}
	cmd := exec.Command("go", "build", "-ldflags", strings.TrimSpace(string(flags)), "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	buildCache[pkg] = out
	return out
}

// UseBinary makes [BuildBinary](pkg) return path, an executable built elsewhere, until the test
// ends: a test of what ships (test/e2e's TestInstall runs the binaries taken out of the images)
// sets it before starting anything, and the framework's Start functions then run that binary.
func UseBinary(t TB, pkg, path string) {
	t.Helper()
	buildMu.Lock()
	old, had := buildCache[pkg]
	buildCache[pkg] = path
	buildMu.Unlock()
	t.Cleanup(func() {
		buildMu.Lock()
		defer buildMu.Unlock()
		if had {
			buildCache[pkg] = old
		} else {
			delete(buildCache, pkg)
		}
	})
}

// binDirPrefix names the per-process directories BuildBinary builds into.
const binDirPrefix = "cluster-mapper-bin-"

// binDir returns this process's directory for built binaries, <tmp>/cluster-mapper-bin-<pid>.
// A test binary cannot clean up after itself when it is killed, so on first use it removes the
// directories of processes that are gone.
func binDir() (string, error) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d", binDirPrefix, os.Getpid()))
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), binDirPrefix+"*"))
	for _, d := range old {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), binDirPrefix))
		if err == nil && len(LiveProcesses(pid)) == 0 {
			_ = os.RemoveAll(d)
		}
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// moduleRoot finds the directory holding this module's go.mod, upwards from the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// StartMapperAPIServer builds and starts mapper-apiserver on a free loopback port, mirroring
// source with the source's admin credentials, delegating authentication and authorization to
// the source, with a serving certificate from a new CA. extraArgs are appended to the command
// line (e.g. "--resources=configmaps,deployments.apps"). It waits until /readyz answers 200
// (every source informer synced) and stops the process in t.Cleanup.
//
// The server runs with --location-access=Open (every location sees what is assigned to it, as
// before LocationBindings existed), so that a test about views needs no LocationBindings; a
// test about tenancy passes "--location-access=Bound" in extraArgs (the server's default, and
// the demo's and the docs'), which wins as the later flag.
func StartMapperAPIServer(t TB, source *ControlPlane, extraArgs ...string) *MapperAPIServer {
	t.Helper()
	bin := BuildBinary(t, "./cmd/mapper-apiserver")
	dir := t.TempDir()
	ca := NewCA(t, dir, "serving-ca", "mapper-apiserver-ca")
	serving := ca.IssueServingCert(t, dir, "serving", "localhost", "127.0.0.1")
	admin := source.AdminKubeconfig()
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		port, err := FreePort()
		if err != nil {
			t.Fatalf("mapper-apiserver: %v", err)
		}
		args := append([]string{
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			"--tls-cert-file=" + serving.CertFile,
			"--tls-private-key-file=" + serving.KeyFile,
			"--source-kubeconfig=" + admin,
			"--kubeconfig=" + admin,
			"--authentication-kubeconfig=" + admin,
			"--authorization-kubeconfig=" + admin,
			"--location-access=Open",
			"-v=2",
		}, extraArgs...)
		p := StartProcess(t, ProcessSpec{Name: "mapper-apiserver", Path: bin, Args: args})
		m := &MapperAPIServer{URL: fmt.Sprintf("https://127.0.0.1:%d", port), ServingCA: ca, Process: p, Source: source, ExtraArgs: extraArgs, args: args}
		if lastErr = m.waitReady(); lastErr == nil {
			return m
		}
		_ = p.Stop()
	}
	t.Fatalf("mapper-apiserver did not become ready: %v", lastErr)
	return nil
}

// Restart stops the server and starts it again with the same command line (same port, same
// serving certificate), waiting until it is ready: a fresh cache, as after a crash or on
// another replica. It fails the test if the server does not come back.
func (m *MapperAPIServer) Restart(t TB) {
	t.Helper()
	m.StopAndStart(t)
	if err := m.waitReady(); err != nil {
		t.Fatalf("mapper-apiserver did not come back: %v", err)
	}
}

// StopAndStart stops the server and starts it again with the same command line without
// waiting for it (see Restart): a test can send requests while it starts. WaitReady waits.
func (m *MapperAPIServer) StopAndStart(t TB) {
	t.Helper()
	if err := m.Process.Stop(); err != nil {
		t.Logf("stopping mapper-apiserver: %v", err)
	}
	m.Process = StartProcess(t, ProcessSpec{Name: "mapper-apiserver", Path: m.Process.Args[0], Args: m.args})
}

// WaitReady waits until /readyz answers 200 (at most MapperAPIServerStartTimeout) and returns
// an error with the log's tail otherwise.
func (m *MapperAPIServer) WaitReady() error { return m.waitReady() }

// waitReady polls /readyz until it answers 200, the process exits, or the timeout passes.
func (m *MapperAPIServer) waitReady() error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(m.ServingCA.CertPEM)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	ctx, cancel := context.WithTimeout(context.Background(), MapperAPIServerStartTimeout)
	defer cancel()
	var last string
	for ctx.Err() == nil {
		if !m.Process.Running() {
			return fmt.Errorf("the process exited; log:\n%s", m.Process.LogTail(logTailLines))
		}
		resp, err := client.Get(m.URL + "/readyz?verbose")
		if err == nil {
			b := make([]byte, 4096)
			n, _ := resp.Body.Read(b)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d: %s", resp.StatusCode, b[:n])
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %v (last answer: %s); log:\n%s", MapperAPIServerStartTimeout, last, m.Process.LogTail(logTailLines))
}

// ViewURL returns the base URL of location's view.
func (m *MapperAPIServer) ViewURL(location string) string {
	return m.URL + contract.ViewPath(location, "")
}

// Config returns a client config for user against the server itself, without client-side
// throttling (QPS -1), as tests drive many requests on purpose.
func (m *MapperAPIServer) Config(u *User) *rest.Config {
	cfg := u.RESTConfig()
	cfg.Host = m.URL
	cfg.CAData = m.ServingCA.CertPEM
	cfg.QPS = -1
	return cfg
}

// ViewConfig returns a client config for user against location's view: client-go, informers
// and kubectl work on it unchanged.
func (m *MapperAPIServer) ViewConfig(u *User, location string) *rest.Config {
	cfg := m.Config(u)
	cfg.Host = m.ViewURL(location)
	return cfg
}

// Metric returns the value of the Prometheus sample name{labels} on the server's /metrics, read
// as user (labels in the exposition's form, e.g. `code="200",resource="things.example.com"`;
// empty for an unlabelled metric). It fails the test when /metrics cannot be read, and returns
// 0 when the sample is absent.
func (m *MapperAPIServer) Metric(t TB, u *User, name, labels string) float64 {
	t.Helper()
	client, err := rest.HTTPClientFor(m.Config(u))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(m.URL + "/metrics")
	if err != nil {
		t.Fatalf("reading /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reading /metrics: %s", resp.Status)
	}
	sample := name
	if labels != "" {
		sample += "{" + labels + "}"
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", sample, err)
			}
			return v
		}
	}
	return 0
}
