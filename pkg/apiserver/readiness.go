package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// clientCACheck keeps the server unready until the delegated client CA is served.
//
// A delegating server reads the client CA from kube-system/extension-apiserver-authentication
// (key client-ca-file) with a controller whose first load runs before its informer has synced,
// so for a moment after start-up TLS asks for no client certificate and certificate users are
// served as system:anonymous. The check passes once the CA bundle the server serves with holds
// the ConfigMap's client-ca-file (or the ConfigMap has none); after that it stays passed, as
// later CA rotation is the controller's business.
type clientCACheck struct {
	serving *genericapiserver.SecureServingInfo
	client  kubernetes.Interface
	ready   atomic.Bool
}

// newClientCACheck returns the check, or nil when there is no core API client or no client CA.
func newClientCACheck(serving *genericapiserver.SecureServingInfo, cfg *rest.Config) healthz.HealthChecker {
	if serving == nil || serving.ClientCA == nil || cfg == nil {
		return nil
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil
	}
	return &clientCACheck{serving: serving, client: client}
}

// Name names the check in /readyz.
func (c *clientCACheck) Name() string { return "delegated-client-ca-loaded" }

// Check reports an error until the delegated client CA is in the served bundle.
func (c *clientCACheck) Check(*http.Request) error {
	if c.ready.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cm, err := c.client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the delegated authentication configuration: %w", err)
	}
	want := bytes.TrimSpace([]byte(cm.Data["client-ca-file"]))
	if len(want) > 0 && !bytes.Contains(c.serving.ClientCA.CurrentCABundleContent(), want) {
		return fmt.Errorf("the client CA of kube-system/extension-apiserver-authentication has not been loaded yet")
	}
	c.ready.Store(true)
	return nil
}
