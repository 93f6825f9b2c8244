package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// APIServerStartTimeout is how long a kube-apiserver may take to answer /readyz with 200.
var APIServerStartTimeout = 3 * time.Minute

// Front-proxy (aggregation layer) settings every control plane uses.
const (
	// FrontProxyClientName is the common name of the client certificate the kube-apiserver
	// aggregator presents to aggregated API servers, and its only --requestheader-allowed-names.
	FrontProxyClientName = "front-proxy-client"
	// AdminUser and AdminGroup are the identity of [ControlPlane.Admin].
	AdminUser  = "admin"
	AdminGroup = "system:masters"
)

// ControlPlaneOptions configures [StartControlPlane]. The zero value starts a kube-apiserver
// with its own etcd.
type ControlPlaneOptions struct {
	// Name identifies the control plane in logs and file names; default "kube-apiserver-<n>".
	Name string
	// Etcd is an etcd to share with other control planes; nil starts a new one that this control
	// plane owns and stops.
	Etcd *Etcd
	// EtcdPrefix is the key prefix in etcd; default "/registry" in an owned etcd, and
	// [Etcd.NewPrefix] in a shared one.
	EtcdPrefix string
	// ExtraArgs are appended to the kube-apiserver command line; for single-valued flags they
	// override the framework's defaults.
	ExtraArgs []string
}

// FrontProxy describes the aggregation-layer configuration of a control plane: an aggregated API
// server trusts requests whose client certificate is signed by CA and has a common name in
// AllowedNames, and takes the user from the headers below. kube-apiserver also publishes this
// in the kube-system/extension-apiserver-authentication ConfigMap.
type FrontProxy struct {
	// CA signs the aggregator's client certificate (--requestheader-client-ca-file).
	CA *CA
	// ClientCert is the aggregator's client certificate (--proxy-client-cert-file/-key-file).
	ClientCert *KeyPair
	// AllowedNames is --requestheader-allowed-names.
	AllowedNames []string
	// UsernameHeaders, GroupHeaders and ExtraHeaderPrefixes are the --requestheader-* headers.
	UsernameHeaders, GroupHeaders, ExtraHeaderPrefixes []string
}

// ControlPlane is a running kube-apiserver (and possibly its own etcd) started by
// [StartControlPlane].
type ControlPlane struct {
	// Name is the control plane's name from its options.
	Name string
	// URL is the kube-apiserver's base URL, https://127.0.0.1:<port>.
	URL string
	// Dir holds the control plane's certificates, keys, kubeconfigs and logs.
	Dir string
	// Etcd is the etcd the kube-apiserver stores into, and EtcdPrefix its key prefix there.
	Etcd       *Etcd
	EtcdPrefix string
	// APIServer is the kube-apiserver process.
	APIServer *Process
	// ServingCA signs the kube-apiserver's serving certificate; its CertPEM is the CA bundle
	// clients need (see [ControlPlane.ServingCABundle]).
	ServingCA *CA
	// ClientCA signs user client certificates (--client-ca-file).
	ClientCA *CA
	// FrontProxy is the aggregation-layer configuration.
	FrontProxy FrontProxy
	// ServiceAccountKeyFile is the private key that signs service-account tokens (also used to
	// verify them).
	ServiceAccountKeyFile string

	extraArgs []string
	ownsEtcd  bool
	admin     *User
}

var controlPlanes atomic.Int64

// StartControlPlane starts a kube-apiserver (and, unless opts.Etcd is set, an etcd for it) and
// waits until /readyz answers 200 to the admin user. Everything is stopped in t.Cleanup, or
// earlier by [ControlPlane.Stop]. It skips or fails the test as [BinDir] does when binaries
// are missing, and fails it with the tail of the kube-apiserver log when the server does not
// become ready within [APIServerStartTimeout].
func StartControlPlane(t TB, opts ControlPlaneOptions) *ControlPlane {
	t.Helper()
	return StartControlPlanes(t, opts)[0]
}

// StartControlPlanes starts one control plane per options like [StartControlPlane], launching
// all kube-apiservers before waiting for any, which is faster than starting them one by one.
func StartControlPlanes(t TB, opts ...ControlPlaneOptions) []*ControlPlane {
	t.Helper()
	cps := make([]*ControlPlane, len(opts))
	for i, o := range opts {
		cps[i] = newControlPlane(t, o)
		cps[i].launch(t)
	}
	for _, cp := range cps {
		err := cp.waitReady()
		for attempt := 2; err != nil && attempt <= startAttempts && cp.portWasTaken(); attempt++ {
			_ = cp.APIServer.Stop()
			cp.launch(t)
			err = cp.waitReady()
		}
		if err != nil {
			t.Fatalf("kube-apiserver %s did not start: %v", cp.Name, err)
		}
	}
	return cps
}

// newControlPlane creates the control plane's etcd (if needed), certificates and admin user.
func newControlPlane(t TB, opts ControlPlaneOptions) *ControlPlane {
	t.Helper()
	n := controlPlanes.Add(1)
	cp := &ControlPlane{Name: opts.Name, Etcd: opts.Etcd, EtcdPrefix: opts.EtcdPrefix, Dir: t.TempDir(), extraArgs: opts.ExtraArgs}
	if cp.Name == "" {
		cp.Name = "kube-apiserver-" + strconv.FormatInt(n, 10)
	}
	if cp.Etcd == nil {
		cp.Etcd = StartEtcd(t)
		cp.ownsEtcd = true
		if cp.EtcdPrefix == "" {
			cp.EtcdPrefix = "/registry"
		}
	} else if cp.EtcdPrefix == "" {
		cp.EtcdPrefix = cp.Etcd.NewPrefix()
	}

	pki := filepath.Join(cp.Dir, "pki")
	cp.ServingCA = NewCA(t, pki, "serving-ca", cp.Name+"-serving-ca")
	cp.ClientCA = NewCA(t, pki, "client-ca", cp.Name+"-client-ca")
	frontProxyCA := NewCA(t, pki, "front-proxy-ca", cp.Name+"-front-proxy-ca")
	cp.FrontProxy = FrontProxy{
		CA:                  frontProxyCA,
		ClientCert:          frontProxyCA.IssueClientCert(t, pki, "front-proxy-client", FrontProxyClientName),
		AllowedNames:        []string{FrontProxyClientName},
		UsernameHeaders:     []string{"X-Remote-User"},
		GroupHeaders:        []string{"X-Remote-Group"},
		ExtraHeaderPrefixes: []string{"X-Remote-Extra-"},
	}
	cp.ServiceAccountKeyFile = NewKeyFile(t, pki, "service-account")
	if err := os.MkdirAll(filepath.Join(cp.Dir, "users"), 0o700); err != nil {
		t.Fatal(err)
	}
	return cp
}

// launch picks a port, issues the serving certificate for it and starts the kube-apiserver
// process without waiting for it.
func (cp *ControlPlane) launch(t TB) {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cp.URL = fmt.Sprintf("https://127.0.0.1:%d", port)
	pki := filepath.Join(cp.Dir, "pki")
	serving := cp.ServingCA.IssueServingCert(t, pki, "serving",
		"127.0.0.1", "localhost", "::1", "10.0.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
	// The admin user is (re)made after the URL is known, as its kubeconfig names the URL.
	cp.admin = cp.NewUser(t, AdminUser, AdminGroup)

	fp := cp.FrontProxy
	args := []string{
		"--etcd-servers=" + cp.Etcd.URL,
		"--etcd-prefix=" + cp.EtcdPrefix,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + pki,
		"--tls-cert-file=" + serving.CertFile,
		"--tls-private-key-file=" + serving.KeyFile,
		"--client-ca-file=" + cp.ClientCA.CertFile,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + cp.ServiceAccountKeyFile,
		"--service-account-signing-key-file=" + cp.ServiceAccountKeyFile,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		// No controller-manager creates default service accounts, so pods could not be created.
		"--disable-admission-plugins=ServiceAccount",
		// Loopback addresses are not valid endpoints of the kubernetes Service.
		"--endpoint-reconciler-type=none",
		"--requestheader-client-ca-file=" + fp.CA.CertFile,
		"--requestheader-allowed-names=" + strings.Join(fp.AllowedNames, ","),
		"--requestheader-username-headers=" + strings.Join(fp.UsernameHeaders, ","),
		"--requestheader-group-headers=" + strings.Join(fp.GroupHeaders, ","),
		"--requestheader-extra-headers-prefix=" + strings.Join(fp.ExtraHeaderPrefixes, ","),
		"--proxy-client-cert-file=" + fp.ClientCert.CertFile,
		"--proxy-client-key-file=" + fp.ClientCert.KeyFile,
		"--enable-aggregator-routing=false",
		"--profiling=false",
	}
	args = append(args, cp.extraArgs...)
	cp.APIServer = StartProcess(t, ProcessSpec{
		Name:   cp.Name,
		Path:   binary(t, KubeAPIServerBinary),
		Args:   args,
		LogDir: cp.Dir,
	})
}

// waitReady polls /readyz as the admin until it answers 200, the process exits, or
// APIServerStartTimeout passes.
func (cp *ControlPlane) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), APIServerStartTimeout)
	defer cancel()
	cfg := cp.AdminConfig()
	cfg.Timeout = 5 * time.Second
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cp.URL+"/readyz", nil)
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, body)
		} else {
			last = err.Error()
		}
		p := cp.APIServer
		select {
		case <-p.Exited():
			return fmt.Errorf("kube-apiserver exited (%v); log %s:\n%s", p.ExitError(), p.LogPath, p.LogTail(logTailLines))
		case <-ctx.Done():
			return fmt.Errorf("/readyz not OK after %v; last answer: %s\nlog %s:\n%s", APIServerStartTimeout, last, p.LogPath, p.LogTail(logTailLines))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// portWasTaken reports whether the kube-apiserver failed because its port was in use.
func (cp *ControlPlane) portWasTaken() bool {
	return !cp.APIServer.Running() && strings.Contains(cp.APIServer.LogTail(logTailLines), "address already in use")
}

// Admin returns the control plane's admin user (AdminUser in group system:masters).
func (cp *ControlPlane) Admin() *User { return cp.admin }

// AdminConfig returns a new copy of the admin user's client config.
func (cp *ControlPlane) AdminConfig() *rest.Config { return cp.admin.RESTConfig() }

// AdminKubeconfig returns the path of a kubeconfig file for the admin user.
func (cp *ControlPlane) AdminKubeconfig() string { return cp.admin.KubeconfigPath }

// ServingCABundle returns the PEM CA bundle that verifies the kube-apiserver's serving
// certificate.
func (cp *ControlPlane) ServingCABundle() []byte { return cp.ServingCA.CertPEM }

// PIDs returns the process ids of the kube-apiserver and, if this control plane owns it, its
// etcd, for [AssertStopped].
func (cp *ControlPlane) PIDs() []int {
	pids := []int{cp.APIServer.PID}
	if cp.ownsEtcd {
		pids = append(pids, cp.Etcd.Process.PID)
	}
	return pids
}

// Stop stops the kube-apiserver and then, if this control plane started it, its etcd, instead
// of waiting for t.Cleanup. It is idempotent and returns the errors of [Process.Stop].
func (cp *ControlPlane) Stop() error {
	err := cp.APIServer.Stop()
	if cp.ownsEtcd {
		err = errors.Join(err, cp.Etcd.Stop())
	}
	return err
}
