// Package healthserver serves a component's /metrics, /healthz and /readyz, the endpoints of
// component-base's legacy registry and k8s.io/apiserver's healthz checks, for the binaries that
// are not API servers themselves (mapper, mapper-controller).
package healthserver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
	genericmux "k8s.io/apiserver/pkg/server/mux"
	"k8s.io/apiserver/pkg/server/routes"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// Serve serves /metrics (the component-base legacy registry), /healthz (liveness: the
// process answers and, with leader election, the lease is renewed in time) and /readyz (the
// readiness checks) on address until ctx ends; both include the ping check. With profiling it
// also serves Go's /debug/pprof (k8s.io/apiserver's routes.Profiling, what
// kube-controller-manager's --profiling serves); the endpoint has no authentication, so
// callers keep it off by default. address "0" or "" serves nothing. It returns once the
// listener is open, or the error of net.Listen.
func Serve(ctx context.Context, address string, live []healthz.HealthChecker, ready []healthz.HealthChecker, profiling bool) error {
	if address == "0" || address == "" {
		return nil
	}
	mux := genericmux.NewPathRecorderMux("healthserver")
	mux.Handle("/metrics", legacyregistry.Handler())
	healthz.InstallHandler(mux, append([]healthz.HealthChecker{healthz.PingHealthz}, live...)...)
	healthz.InstallReadyzHandler(mux, append([]healthz.HealthChecker{healthz.PingHealthz}, ready...)...)
	if profiling {
		routes.Profiling{}.Install(mux)
	}
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "The metrics and health endpoint stopped")
		}
	}()
	klog.FromContext(ctx).Info("Serving /metrics, /healthz and /readyz", "address", ln.Addr().String())
	return nil
}
