package framework

import (
	"os"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// User is an identity of a [ControlPlane]: a client certificate signed by the control plane's
// client CA, which kube-apiserver authenticates as Name with Groups. What the user may do is up
// to RBAC; a new user may do nothing beyond what system:authenticated allows.
type User struct {
	// Name is the user name (the certificate's common name).
	Name string
	// Groups are the user's groups (the certificate's organizations).
	Groups []string
	// Cert is the client certificate and key, also on disk.
	Cert *KeyPair
	// KubeconfigPath is a kubeconfig file for this user against the control plane.
	KubeconfigPath string

	dir    string
	config *rest.Config
}

// NewUser issues a client certificate for name in groups, writes a kubeconfig for it into the
// control plane's directory, and returns the user. It fails the test on any error.
func (cp *ControlPlane) NewUser(t TB, name string, groups ...string) *User {
	t.Helper()
	dir, err := os.MkdirTemp(filepath.Join(cp.Dir, "users"), sanitizeFileName(name)+"-")
	if err != nil {
		t.Fatalf("creating user %q: %v", name, err)
	}
	u := &User{
		Name:   name,
		Groups: append([]string(nil), groups...),
		Cert:   cp.ClientCA.IssueClientCert(t, dir, "client", name, groups...),
		dir:    dir,
	}
	u.config = restConfigFor(cp.URL, cp.ServingCA.CertPEM, u.Cert)
	u.KubeconfigPath = u.KubeconfigFor(t, cp.URL, cp.ServingCA.CertPEM)
	return u
}

// restConfigFor returns a client config for host, verified with caData, authenticating with kp.
func restConfigFor(host string, caData []byte, kp *KeyPair) *rest.Config {
	return &rest.Config{
		Host: host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   caData,
			CertData: kp.CertPEM,
			KeyData:  kp.KeyPEM,
		},
	}
}

// RESTConfig returns a new copy of the user's client config for the control plane; the caller
// may modify it.
func (u *User) RESTConfig() *rest.Config { return rest.CopyConfig(u.config) }

// Client returns a clientset for the user against the control plane. It fails the test on error.
func (u *User) Client(t TB) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(u.RESTConfig())
	if err != nil {
		t.Fatalf("client for %s: %v", u.Name, err)
	}
	return c
}

// KubeconfigFor writes a new kubeconfig file with the user's credentials and server (a URL,
// which may include a path such as a location view's base URL) verified with caData (PEM), and
// returns its path. It fails the test on error.
func (u *User) KubeconfigFor(t TB, server string, caData []byte) string {
	t.Helper()
	f, err := os.CreateTemp(u.dir, "kubeconfig-*")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	cfg := rest.CopyConfig(u.config)
	cfg.Host = server
	cfg.CAData = caData
	if err := WriteKubeconfig(f.Name(), cfg); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}
