package framework

import (
	"fmt"
	"path/filepath"
	"syscall"
	"time"
)

// KillAPIServer ends the kube-apiserver with SIGKILL (a crash: no graceful shutdown, watches
// cut mid-stream) and waits until it is gone. etcd keeps running with the data.
func (cp *ControlPlane) KillAPIServer(t TB) {
	t.Helper()
	p := cp.APIServer
	_ = syscall.Kill(-p.PID, syscall.SIGKILL)
	select {
	case <-p.Exited():
	case <-time.After(StopTimeout):
		t.Fatalf("%s (pid %d) did not exit after SIGKILL", p.Name, p.PID)
	}
}

// StartAPIServerAgain starts the kube-apiserver again with the command line it had (same port,
// certificates, etcd and data) and waits until /readyz answers 200; it returns when that
// happened. The process is stopped in t.Cleanup like the first one.
func (cp *ControlPlane) StartAPIServerAgain(t TB) time.Time {
	t.Helper()
	old := cp.APIServer
	cp.APIServer = StartProcess(t, ProcessSpec{Name: cp.Name, Path: old.Args[0], Args: old.Args[1:], LogDir: filepath.Dir(old.LogPath)})
	if err := cp.waitReady(); err != nil {
		t.Fatal(fmt.Errorf("restarting %s: %w", cp.Name, err))
	}
	return time.Now()
}
