package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
)

// fakeTB records Skip and Fatal calls instead of ending the test.
type fakeTB struct {
	testing.TB
	skipped, fatal string
}

func (f *fakeTB) Helper()                   {}
func (f *fakeTB) Skip(args ...any)          { f.skipped = fmt.Sprint(args...) }
func (f *fakeTB) Fatal(args ...any)         { f.fatal = fmt.Sprint(args...) }
func (f *fakeTB) Fatalf(s string, a ...any) { f.fatal = fmt.Sprintf(s, a...) }

func TestBinDirMissingNamesInstallCommand(t *testing.T) {
	t.Setenv(TestenvEnv, t.TempDir())
	f := &fakeTB{TB: t}
	BinDir(f)
	msg := f.fatal
	if testing.Short() {
		msg = f.skipped
	}
	for _, want := range []string{"make testenv", "hack/install-testenv.sh", "kube-apiserver"} {
		if !strings.Contains(msg, want) {
			t.Errorf("BinDir message %q does not mention %q", msg, want)
		}
	}
}

func TestProcessStopKillsGroup(t *testing.T) {
	// The shell leaves a background child in its group; Stop must take both down.
	p := StartProcess(t, ProcessSpec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", "sleep 300 & echo started; wait"}})
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return strings.Contains(p.LogTail(5), "started"), nil
	}); err != nil {
		t.Fatalf("shell did not start; log: %s", p.LogTail(5))
	}
	if live := LiveProcesses(p.PID); len(live) != 2 {
		t.Errorf("LiveProcesses(%d) = %v, want the shell and its sleep", p.PID, live)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if p.Running() {
		t.Error("process still running after Stop")
	}
	AssertStopped(t, p.PID)
	if err := p.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	found := false
	for _, q := range Processes() {
		found = found || q == p
	}
	if !found {
		t.Error("Processes() does not list the process")
	}
}

func TestProcessStopEscalatesToKill(t *testing.T) {
	defer func(d time.Duration) { StopTimeout = d }(StopTimeout)
	StopTimeout = 200 * time.Millisecond
	p := StartProcess(t, ProcessSpec{Name: "stubborn", Path: "/bin/sh", Args: []string{"-c", "trap '' TERM; echo ready; while :; do sleep 1; done"}})
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return strings.Contains(p.LogTail(1), "ready"), nil
	}); err != nil {
		t.Fatalf("the shell did not start; log: %s", p.LogTail(5))
	}
	if err := p.Stop(); err == nil || !strings.Contains(err.Error(), "killed them") {
		t.Errorf("Stop of a process ignoring SIGTERM: got %v, want an error saying it was killed", err)
	}
	AssertStopped(t, p.PID)
}

func TestCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := NewCA(t, dir, "ca", "test-ca")
	serving := ca.IssueServingCert(t, dir, "serving", "127.0.0.1", "localhost")
	client := ca.IssueClientCert(t, dir, "client", "alice", "devs", "ops")

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	for _, tc := range []struct {
		kp    *KeyPair
		usage x509.ExtKeyUsage
		host  string
	}{{serving, x509.ExtKeyUsageServerAuth, "127.0.0.1"}, {serving, x509.ExtKeyUsageServerAuth, "localhost"}, {client, x509.ExtKeyUsageClientAuth, ""}} {
		pair, err := tls.LoadX509KeyPair(tc.kp.CertFile, tc.kp.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: tc.host, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
			t.Errorf("verifying %s for %q: %v", tc.kp.CertFile, tc.host, err)
		}
	}
	leaf, _ := tls.LoadX509KeyPair(client.CertFile, client.KeyFile)
	c, _ := x509.ParseCertificate(leaf.Certificate[0])
	groups := append([]string(nil), c.Subject.Organization...)
	sort.Strings(groups)
	if c.Subject.CommonName != "alice" || strings.Join(groups, ",") != "devs,ops" {
		t.Errorf("client subject = %v, want CN=alice O=devs,ops", c.Subject)
	}
}

func TestWriteKubeconfigRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ca := NewCA(t, dir, "ca", "test-ca")
	client := ca.IssueClientCert(t, dir, "client", "alice")
	u := &User{Name: "alice", Cert: client, dir: dir}
	u.config = restConfigFor("https://127.0.0.1:1", ca.CertPEM, client)

	server := "https://127.0.0.1:6443/apis/mapper.kcp.io/v1alpha1/locations/east/proxy"
	path := u.KubeconfigFor(t, server, []byte("other-ca"))
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != server || string(cfg.CAData) != "other-ca" || string(cfg.CertData) != string(client.CertPEM) || string(cfg.KeyData) != string(client.KeyPEM) {
		t.Errorf("kubeconfig round trip: host=%q ca=%q, cert/key match=%v", cfg.Host, cfg.CAData,
			string(cfg.CertData) == string(client.CertPEM) && string(cfg.KeyData) == string(client.KeyPEM))
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig mode: %v %v, want 0600", fi.Mode(), err)
	}
	if filepath.Dir(path) != dir {
		t.Errorf("kubeconfig written to %s, want in %s", path, dir)
	}
}
