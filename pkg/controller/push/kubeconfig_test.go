package push

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfig returns a self-contained kubeconfig for server with token, changed by change.
func kubeconfig(t *testing.T, server, token string, change func(*clientcmdapi.Config)) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: server}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	if change != nil {
		change(kc)
	}
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func secretWith(data []byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-mapper-system", Name: "s"}, Data: map[string][]byte{"kubeconfig": data}}
}

func TestTargetConfig(t *testing.T) {
	cfg, hash, err := TargetConfig(secretWith(kubeconfig(t, "https://127.0.0.1:6443", "t1", nil)), "kubeconfig", false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "t1" || hash == "" {
		t.Errorf("TargetConfig = %s %q %q", cfg.Host, cfg.BearerToken, hash)
	}
	_, rotated, err := TargetConfig(secretWith(kubeconfig(t, "https://127.0.0.1:6443", "t2", nil)), "kubeconfig", false)
	if err != nil || rotated == hash {
		t.Errorf("a new token must change the hash: %q vs %q (%v)", rotated, hash, err)
	}

	for name, c := range map[string]struct {
		secret *corev1.Secret
		want   string
	}{
		"no key":             {secretWith(nil), "has no key"},
		"not YAML":           {secretWith([]byte("clusters: {not: [a list")), "is not a kubeconfig"},
		"no current context": {secretWith(kubeconfig(t, "https://x", "t", func(k *clientcmdapi.Config) { k.CurrentContext = "" })), "no current context"},
		"no server":          {secretWith(kubeconfig(t, "", "t", nil)), "no cluster with a server"},
		"CA file":            {secretWith(kubeconfig(t, "https://x", "t", func(k *clientcmdapi.Config) { k.Clusters["c"].CertificateAuthority = "/etc/ca" })), "certificate-authority names a file"},
		"token file":         {secretWith(kubeconfig(t, "https://x", "", func(k *clientcmdapi.Config) { k.AuthInfos["u"].TokenFile = "/etc/token" })), "tokenFile"},
		"client cert file":   {secretWith(kubeconfig(t, "https://x", "", func(k *clientcmdapi.Config) { k.AuthInfos["u"].ClientCertificate = "/etc/c" })), "client-certificate"},
		"proxy-url":          {secretWith(kubeconfig(t, "https://x", "t", func(k *clientcmdapi.Config) { k.Clusters["c"].ProxyURL = "http://127.0.0.1:3128" })), "--push-allow-proxy-url"},
		"exec plugin":        {secretWith(kubeconfig(t, "https://x", "", func(k *clientcmdapi.Config) { k.AuthInfos["u"].Exec = &clientcmdapi.ExecConfig{Command: "sh"} })), "plugins"},
		"malformed cert data": {secretWith(kubeconfig(t, "https://x", "", func(k *clientcmdapi.Config) {
			k.AuthInfos["u"].ClientCertificateData = []byte("x")
			k.AuthInfos["u"].ClientKeyData = []byte("y")
		})), "cannot be used"},
	} {
		_, _, err := TargetConfig(c.secret, "kubeconfig", false)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, c.want)
		}
	}

	// With --push-allow-proxy-url the proxy is used.
	cfg, _, err = TargetConfig(secretWith(kubeconfig(t, "https://x", "t", func(k *clientcmdapi.Config) { k.Clusters["c"].ProxyURL = "http://127.0.0.1:3128" })), "kubeconfig", true)
	if err != nil || cfg.Proxy == nil {
		t.Errorf("an allowed proxy-url: config %+v, %v; want its proxy", cfg, err)
	}
}
