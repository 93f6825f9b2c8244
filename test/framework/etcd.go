package framework

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// EtcdStartTimeout is how long [StartEtcd] waits for etcd to report healthy.
var EtcdStartTimeout = 60 * time.Second

// startAttempts is how often a starter retries when a port it picked was taken meanwhile.
const startAttempts = 3

// Etcd is a single-member etcd started by [StartEtcd], serving plain HTTP on loopback.
type Etcd struct {
	// URL is the client URL, http://127.0.0.1:<port>.
	URL string
	// DataDir is its data directory inside the test's temp dir.
	DataDir string
	// Process is the etcd process.
	Process *Process

	prefixes atomic.Int64
}

// StartEtcd starts an etcd on free loopback ports with its data in a t.TempDir() and waits until
// its /health endpoint reports healthy. It is stopped in t.Cleanup (or earlier by [Etcd.Stop]).
// It skips or fails the test as [BinDir] does when the binaries are missing, and fails it with
// the tail of etcd's log when etcd does not come up within [EtcdStartTimeout].
func StartEtcd(t TB) *Etcd {
	t.Helper()
	path := binary(t, EtcdBinary)
	dir := t.TempDir()
	var lastErr error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		clientPort, err1 := FreePort()
		peerPort, err2 := FreePort()
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		clientURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
		peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
		dataDir := filepath.Join(dir, fmt.Sprintf("data-%d", attempt))
		p := StartProcess(t, ProcessSpec{
			Name: "etcd",
			Path: path,
			Args: []string{
				"--name=default",
				"--data-dir=" + dataDir,
				"--listen-client-urls=" + clientURL,
				"--advertise-client-urls=" + clientURL,
				"--listen-peer-urls=" + peerURL,
				"--initial-advertise-peer-urls=" + peerURL,
				"--initial-cluster=default=" + peerURL,
				"--unsafe-no-fsync", // test data is thrown away; fsync only costs time
				"--log-level=warn",
			},
			LogDir: dir,
		})
		e := &Etcd{URL: clientURL, DataDir: dataDir, Process: p}
		lastErr = e.waitHealthy()
		if lastErr == nil {
			return e
		}
		_ = p.Stop()
		if !strings.Contains(p.LogTail(logTailLines), "address already in use") {
			break
		}
	}
	t.Fatalf("etcd did not start: %v", lastErr)
	return nil
}

// waitHealthy polls /health until etcd answers healthy, the process exits, or the timeout ends.
func (e *Etcd) waitHealthy() error {
	ctx, cancel := context.WithTimeout(context.Background(), EtcdStartTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+"/health", nil)
		resp, err := client.Do(req)
		if err == nil {
			var body [256]byte
			n, _ := resp.Body.Read(body[:])
			resp.Body.Close()
			last = fmt.Sprintf("%s: %s", resp.Status, body[:n])
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body[:n]), `"health":"true"`) {
				return nil
			}
		} else {
			last = err.Error()
		}
		select {
		case <-e.Process.Exited():
			return fmt.Errorf("etcd exited (%v); log %s:\n%s", e.Process.ExitError(), e.Process.LogPath, e.Process.LogTail(logTailLines))
		case <-ctx.Done():
			return fmt.Errorf("etcd not healthy after %v (last answer: %s); log %s:\n%s", EtcdStartTimeout, last, e.Process.LogPath, e.Process.LogTail(logTailLines))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// NewPrefix returns a key prefix in this etcd that no other call returned, "/registry-<n>", so
// that several kube-apiservers can share one etcd without seeing each other's objects.
func (e *Etcd) NewPrefix() string {
	return fmt.Sprintf("/registry-%d", e.prefixes.Add(1))
}

// Stop stops etcd now instead of at cleanup; see [Process.Stop]. Stop any kube-apiserver using
// it first.
func (e *Etcd) Stop() error { return e.Process.Stop() }
