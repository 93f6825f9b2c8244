package push

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// DefaultSecretKey is the key of a kubeconfig Secret when the reference names none.
const DefaultSecretKey = "kubeconfig"

// secretKey returns the key the reference names, or DefaultSecretKey.
func secretKey(ref *controlv1alpha1.SecretReference) string {
	if ref.Key != "" {
		return ref.Key
	}
	return DefaultSecretKey
}

// TargetConfig returns the client config of the target from the kubeconfig under key in
// secret, and a hash of that kubeconfig (a change restarts the mapper). The kubeconfig must
// be self-contained: its current context's credentials and CA inline, no files, no exec or
// auth-provider plugins (which would run commands or read files of mapper-controller's
// host), and no proxy-url unless allowProxy (mapper-controller would connect wherever the
// Secret's writer says, from inside the control plane's network). Any error describes why the
// kubeconfig cannot be used (reason KubeconfigInvalid); none comes from connecting anywhere.
func TargetConfig(secret *corev1.Secret, key string, allowProxy bool) (*rest.Config, string, error) {
	data, ok := secret.Data[key]
	if !ok || len(data) == 0 {
		return nil, "", fmt.Errorf("the Secret %s/%s has no key %q", secret.Namespace, secret.Name, key)
	}
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, "", fmt.Errorf("the key %q of the Secret %s/%s is not a kubeconfig: %w", key, secret.Namespace, secret.Name, err)
	}
	if err := selfContained(kc, allowProxy); err != nil {
		return nil, "", fmt.Errorf("the kubeconfig in %s/%s[%s] cannot be used: %w", secret.Namespace, secret.Name, key, err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("the kubeconfig in %s/%s[%s] cannot be used: %w", secret.Namespace, secret.Name, key, err)
	}
	// Building the transport parses the certificates and keys: malformed PEM fails here,
	// not in the mapper.
	if _, err := rest.TransportFor(cfg); err != nil {
		return nil, "", fmt.Errorf("the kubeconfig in %s/%s[%s] cannot be used: %w", secret.Namespace, secret.Name, key, err)
	}
	sum := sha256.Sum256(data)
	return cfg, hex.EncodeToString(sum[:]), nil
}

// selfContained checks that the current context exists and refers to no file, no plugin and,
// unless allowProxy, no proxy.
func selfContained(kc *clientcmdapi.Config, allowProxy bool) error {
	ctx, ok := kc.Contexts[kc.CurrentContext]
	if kc.CurrentContext == "" || !ok {
		return fmt.Errorf("it has no current context")
	}
	cluster, ok := kc.Clusters[ctx.Cluster]
	if !ok || cluster.Server == "" {
		return fmt.Errorf("its current context %q names no cluster with a server", kc.CurrentContext)
	}
	if cluster.CertificateAuthority != "" {
		return fmt.Errorf("certificate-authority names a file; use certificate-authority-data")
	}
	if cluster.ProxyURL != "" && !allowProxy {
		return fmt.Errorf("proxy-url names a proxy, which mapper-controller does not use unless it runs with --push-allow-proxy-url")
	}
	user, ok := kc.AuthInfos[ctx.AuthInfo]
	if !ok {
		return nil // anonymous
	}
	switch {
	case user.ClientCertificate != "" || user.ClientKey != "":
		return fmt.Errorf("client-certificate or client-key names a file; use client-certificate-data and client-key-data")
	case user.TokenFile != "":
		return fmt.Errorf("tokenFile names a file; use token")
	case user.Exec != nil || user.AuthProvider != nil:
		return fmt.Errorf("exec and auth-provider plugins are not run by mapper-controller; use a token or a client certificate")
	}
	return nil
}
