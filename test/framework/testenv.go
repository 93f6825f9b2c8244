package framework

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The versions hack/install-testenv.sh builds by default; they name the default testenv
// directory and must be kept in step with that script.
const (
	KubeVersion = "v1.36.3"
	EtcdVersion = "v3.6.16"
)

// TestenvEnv is the environment variable that names the directory holding the etcd,
// kube-apiserver and kubectl binaries. `make test` sets it from hack/install-testenv.sh's output.
const TestenvEnv = "CLUSTER_MAPPER_TESTENV"

// The binaries the framework runs, by file name inside the testenv directory.
const (
	EtcdBinary          = "etcd"
	KubeAPIServerBinary = "kube-apiserver"
	KubectlBinary       = "kubectl"
	// KubeControllerManagerBinary runs the deployment and replicaset controllers on test
	// clusters ([ControlPlane.StartControllerManager]).
	KubeControllerManagerBinary = "kube-controller-manager"
)

// DefaultTestenvDir returns the directory hack/install-testenv.sh installs into when
// $CLUSTER_MAPPER_TESTENV is not set: $XDG_CACHE_HOME (or ~/.cache)
// /cluster-mapper/testenv/kube-<KubeVersion>_etcd-<EtcdVersion>. It returns an error only when
// neither XDG_CACHE_HOME nor the home directory is known.
func DefaultTestenvDir() (string, error) {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("neither XDG_CACHE_HOME nor a home directory is set: %w", err)
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "cluster-mapper", "testenv", "kube-"+KubeVersion+"_etcd-"+EtcdVersion), nil
}

// TestenvDir returns the directory holding the control-plane binaries: $CLUSTER_MAPPER_TESTENV
// if set, else [DefaultTestenvDir]. It does not check that the binaries exist; see [BinDir].
func TestenvDir() (string, error) {
	if dir := os.Getenv(TestenvEnv); dir != "" {
		return dir, nil
	}
	return DefaultTestenvDir()
}

// BinDir returns the testenv directory after checking that etcd, kube-apiserver and kubectl are
// executable in it. When one is missing the test is skipped in -short mode and fails otherwise,
// in both cases naming the command that builds them (make testenv).
func BinDir(t TB) string {
	t.Helper()
	dir, err := TestenvDir()
	if err == nil {
		err = checkBinaries(dir)
	}
	if err != nil {
		msg := fmt.Sprintf("control-plane binaries not available; build them with `make testenv` "+
			"(hack/install-testenv.sh) or point $%s at a directory holding %s, %s and %s:\n%v",
			TestenvEnv, EtcdBinary, KubeAPIServerBinary, KubectlBinary+", "+KubeControllerManagerBinary, err)
		if testing.Testing() && testing.Short() {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	return dir
}

// checkBinaries returns an error naming every binary that is missing or not executable in dir.
func checkBinaries(dir string) error {
	var errs []error
	for _, name := range []string{EtcdBinary, KubeAPIServerBinary, KubectlBinary, KubeControllerManagerBinary} {
		fi, err := os.Stat(filepath.Join(dir, name))
		switch {
		case err != nil:
			errs = append(errs, err)
		case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
			errs = append(errs, fmt.Errorf("%s is not an executable file", filepath.Join(dir, name)))
		}
	}
	return errors.Join(errs...)
}

// binary returns the absolute path of the named testenv binary, skipping or failing the test as
// [BinDir] does when the testenv is incomplete.
func binary(t TB, name string) string {
	t.Helper()
	return filepath.Join(BinDir(t), name)
}

// KubectlPath returns the absolute path of the testenv's kubectl binary; see [BinDir] for what
// happens when it is missing.
func KubectlPath(t TB) string {
	t.Helper()
	return binary(t, KubectlBinary)
}
