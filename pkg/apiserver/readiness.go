package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// delegatedAuthentication follows whether the server's delegated authentication is ready, and
// until it is answers every request but the health checks with 503 and a Retry-After
// (gate), and keeps /readyz failing (Check).
//
// A delegating server reads the client CA (key client-ca-file) and the front-proxy CA
// (requestheader-client-ca-file) from kube-system/extension-apiserver-authentication, and the
// client CA with a controller whose first load runs before its informer has synced: for a
// moment after start-up TLS asks for no client certificate, or for the wrong ones, and a client
// with a certificate, or the aggregator with its front-proxy certificate and X-Remote-User, is
// served as system:anonymous: a 403 that says "forbidden: User system:anonymous", where the
// truth is that the server is starting. It is ready once the bundle the server verifies client
// certificates with holds both CAs of the ConfigMap (or the ConfigMap has none); after that it
// stays ready, as later CA rotation is the controllers' business.
type delegatedAuthentication struct {
	serving *genericapiserver.SecureServingInfo
	client  kubernetes.Interface
	ready   atomic.Bool
	// why says why it is not ready yet (a string).
	why atomic.Value
}

// authenticationConfigMapKeys are the CA bundles of extension-apiserver-authentication the
// server verifies client certificates with.
var authenticationConfigMapKeys = []string{"client-ca-file", "requestheader-client-ca-file"}

// newDelegatedAuthentication returns the readiness of the delegated authentication of serving,
// read with cfg; nil when there is no core API client or no client CA (nothing to wait for).
func newDelegatedAuthentication(serving *genericapiserver.SecureServingInfo, cfg *rest.Config) *delegatedAuthentication {
	if serving == nil || serving.ClientCA == nil || cfg == nil {
		return nil
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil
	}
	d := &delegatedAuthentication{serving: serving, client: client}
	d.why.Store("the server has not read kube-system/extension-apiserver-authentication yet")
	return d
}

// Run checks every 100 ms until the authentication is ready or ctx ends.
func (d *delegatedAuthentication) Run(ctx context.Context) {
	_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		return d.check(ctx) == nil, nil
	})
}

// check reads the ConfigMap and compares its CA bundles with the served one, marking the
// authentication ready when both are in it; else it returns why not.
func (d *delegatedAuthentication) check(ctx context.Context) error {
	if d.ready.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cm, err := d.client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		err = fmt.Errorf("reading the delegated authentication configuration: %w", err)
		d.why.Store(err.Error())
		return err
	}
	served := d.serving.ClientCA.CurrentCABundleContent()
	for _, key := range authenticationConfigMapKeys {
		want := bytes.TrimSpace([]byte(cm.Data[key]))
		if len(want) > 0 && !bytes.Contains(served, want) {
			err := fmt.Errorf("the %s of kube-system/extension-apiserver-authentication has not been loaded yet", key)
			d.why.Store(err.Error())
			return err
		}
	}
	if !d.ready.Swap(true) {
		klog.InfoS("The delegated authentication is ready: the client CA and the front-proxy CA are loaded")
	}
	return nil
}

// Name names the check in /readyz.
func (d *delegatedAuthentication) Name() string { return "delegated-authentication-loaded" }

// Check reports an error until the delegated authentication is ready.
func (d *delegatedAuthentication) Check(*http.Request) error {
	if d.ready.Load() {
		return nil
	}
	return fmt.Errorf("%s", d.why.Load())
}

// gate wraps the server's handler: until the authentication is ready, every request but the
// health checks (/healthz, /livez, /readyz, which need no user) is answered 503 Service
// Unavailable with Retry-After: 1 and a Status saying why, before it is authenticated. client-go
// retries such an answer by itself; the aggregator passes it on. Afterwards the check costs one
// atomic load per request.
func (d *delegatedAuthentication) gate(handler http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if d.ready.Load() || healthPath(req.URL.Path) {
			handler.ServeHTTP(w, req)
			return
		}
		err := apierrors.NewServiceUnavailable(fmt.Sprintf("mapper-apiserver is starting: it cannot authenticate requests yet (%s)", d.why.Load()))
		err.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: 1}
		responsewriters.ErrorNegotiated(err, Codecs, schema.GroupVersion{Version: "v1"}, w, req)
	})
}

// healthPath reports whether path is a health check of the generic server.
func healthPath(path string) bool {
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}
