package apiserver

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestLocationKubeconfig(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, []byte("CA PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster: {server: "https://prod.example:6443/", certificate-authority: ca.crt}
- name: dev
  cluster: {server: "https://dev.example:6443"}
users:
- name: alice
  user: {token: secret-token}
- name: bob
  user: {token: other}
contexts:
- name: prod-alice
  context: {cluster: prod, user: alice, namespace: shop}
- name: dev-bob
  context: {cluster: dev, user: bob}
current-context: dev-bob
`), 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := LocationKubeconfig(*raw, "prod-alice", "east")
	if err != nil {
		t.Fatal(err)
	}
	name := "prod-alice-location-east"
	if cfg.CurrentContext != name || len(cfg.Contexts) != 1 || len(cfg.Clusters) != 1 || len(cfg.AuthInfos) != 1 {
		t.Fatalf("want one context, cluster and user named after the location, got %+v", cfg)
	}
	cluster := cfg.Clusters[name]
	if want := "https://prod.example:6443/apis/mapper.kcp.io/v1alpha1/locations/east/proxy"; cluster == nil || cluster.Server != want {
		t.Fatalf("server = %+v, want %s", cluster, want)
	}
	if string(cluster.CertificateAuthorityData) != "CA PEM" || cluster.CertificateAuthority != "" {
		t.Errorf("the CA file is not embedded: %+v", cluster)
	}
	ctx := cfg.Contexts[name]
	if ctx.Cluster != name || ctx.AuthInfo != "alice" || ctx.Namespace != "shop" {
		t.Errorf("context = %+v", ctx)
	}
	if cfg.AuthInfos["alice"].Token != "secret-token" {
		t.Errorf("the user's credentials are not kept: %+v", cfg.AuthInfos["alice"])
	}
	// The result is a valid kubeconfig that client-go loads.
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(rc.Host, "/locations/east/proxy") || rc.BearerToken != "secret-token" {
		t.Errorf("client config = host %s token %q", rc.Host, rc.BearerToken)
	}
	// The input is not changed.
	if raw.Clusters["prod"].Server != "https://prod.example:6443/" || len(raw.Contexts) != 2 {
		t.Errorf("LocationKubeconfig changed its input: %+v", raw)
	}

	// The current context is the default.
	cfg, err = LocationKubeconfig(*raw, "", "west")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Clusters["dev-bob-location-west"]; got == nil || got.Server != "https://dev.example:6443/apis/mapper.kcp.io/v1alpha1/locations/west/proxy" {
		t.Errorf("current context: %+v", cfg.Clusters)
	}

	view, _ := LocationKubeconfig(*raw, "prod-alice", "east")
	for _, c := range []struct {
		name     string
		raw      clientcmdapi.Config
		context  string
		location string
		want     string
	}{
		{"invalid location", *raw, "", "East_1", "invalid location"},
		{"missing context", *raw, "nope", "east", `no context "nope"`},
		{"no current context", clientcmdapi.Config{}, "", "east", "no current context"},
		{"already a view", *view, "", "west", "already points into"},
	} {
		if _, err := LocationKubeconfig(c.raw, c.context, c.location); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

func TestWriteServingCert(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "serving-cert")
	if err := WriteServingCert(dir, "mapper-system", "mapper-apiserver", time.Hour); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, ServingCertFiles.Cert), filepath.Join(dir, ServingCertFiles.Key))
	if err != nil {
		t.Fatalf("tls.crt and tls.key are not a key pair: %v", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, ServingCertFiles.CA))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.crt holds no certificate")
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	// What the kube-apiserver aggregator checks: the Service's name, against the caBundle.
	for _, name := range []string{"mapper-apiserver.mapper-system.svc", "mapper-apiserver.mapper-system.svc.cluster.local"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("the certificate does not verify for %s with ca.crt: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.mapper-system.svc", Roots: roots}); err == nil {
		t.Error("the certificate verifies for another Service's name")
	}
	if until := time.Until(leaf.NotAfter); until < 59*time.Minute || until > time.Hour {
		t.Errorf("valid for another %v, asked for one hour", until)
	}
	if info, err := os.Stat(filepath.Join(dir, ServingCertFiles.Key)); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("tls.key mode: %v %v", info.Mode(), err)
	}
}
