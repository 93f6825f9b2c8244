package framework

import (
	"fmt"
	"net"
)

// FreePort returns a TCP port on 127.0.0.1 that was free when it was asked for. Another process
// can take it before the caller binds it; the framework's starters retry on "address already
// in use". It returns an error only when the OS cannot open a loopback listener.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
