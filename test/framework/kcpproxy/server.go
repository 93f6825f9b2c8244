package kcpproxy

import (
	"encoding/pem"
	"net/http/httptest"

	"k8s.io/client-go/rest"
)

// Server is a Proxy served over TLS on a loopback port.
type Server struct {
	// URL is the server's base URL (https://127.0.0.1:<port>); kcp's paths are below it.
	URL string
	// CAData (PEM) verifies the server's certificate.
	CAData []byte

	srv *httptest.Server
}

// Start serves a Proxy in front of backing (see New) on a free loopback port until Close.
func Start(backing *rest.Config) (*Server, error) {
	p, err := New(backing)
	if err != nil {
		return nil, err
	}
	srv := httptest.NewUnstartedServer(p)
	srv.StartTLS()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return &Server{URL: srv.URL, CAData: ca, srv: srv}, nil
}

// WildcardURL is the server URL of kcp's wildcard endpoint, <URL>/clusters/*.
func (s *Server) WildcardURL() string { return s.URL + clustersPrefix + Wildcard }

// ClusterURL is the server URL of logical cluster, <URL>/clusters/<cluster>.
func (s *Server) ClusterURL(cluster string) string { return s.URL + clustersPrefix + cluster }

// Config returns a client config for logical cluster (or Wildcard) through the proxy, without
// credentials (the proxy uses its own) and without client-side throttling.
func (s *Server) Config(cluster string) *rest.Config {
	return &rest.Config{Host: s.ClusterURL(cluster), TLSClientConfig: rest.TLSClientConfig{CAData: s.CAData}, QPS: -1}
}

// Close drops open connections (watches) and stops the server.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}
