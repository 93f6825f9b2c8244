package framework

import (
	"errors"
	"io"
	"net"
	"sync"
)

// TCPProxy forwards TCP connections from a loopback port to a backend address, byte for byte
// (TLS passes through untouched, so the backend's serving certificate must also name the
// proxy's host, as 127.0.0.1 does). A test uses it to partition one client from a server
// without stopping either: [TCPProxy.Cut] closes every open connection and refuses new ones
// until [TCPProxy.Restore]. It is closed in t.Cleanup.
type TCPProxy struct {
	// Addr is the proxy's listening address, 127.0.0.1:<port>.
	Addr string

	backend  string
	listener net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// StartTCPProxy listens on a free loopback port and forwards every accepted connection to
// backend (host:port). It fails the test if it cannot listen.
func StartTCPProxy(t TB, backend string) *TCPProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("tcp proxy: %v", err)
	}
	p := &TCPProxy{Addr: l.Addr().String(), backend: backend, listener: l, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Cut closes every connection open through the proxy and makes it close new ones at once, as
// a network partition between its clients and the backend would: clients see their requests
// and watches fail.
func (p *TCPProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore ends a [TCPProxy.Cut]: new connections are forwarded again.
func (p *TCPProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Close stops listening, closes every connection and waits for the forwarding goroutines.
func (p *TCPProxy) Close() {
	_ = p.listener.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *TCPProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.wg.Add(1)
		go p.forward(client)
	}
}

// forward copies bytes both ways between client and a new connection to the backend until
// either side closes or the proxy is cut.
func (p *TCPProxy) forward(client net.Conn) {
	defer p.wg.Done()
	backend, err := net.Dial("tcp", p.backend)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(client, backend) {
		_ = client.Close()
		_ = backend.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
		done <- struct{}{}
	}
	go pipe(backend, client)
	go pipe(client, backend)
	<-done
	<-done
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, backend)
	p.mu.Unlock()
}

// track records the two ends of a forwarded connection so Cut can close them; it returns false
// (recording nothing) while the proxy is cut.
func (p *TCPProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}
