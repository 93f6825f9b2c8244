package app

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// signalContext returns a context that is cancelled on the first SIGTERM or SIGINT; a second
// signal exits the process at once with status 1. It is what k8s.io/apiserver's
// SetupSignalContext does, without pulling the generic API server into the mapper.
func signalContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	c := make(chan os.Signal, 2)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-c
		cancel()
		<-c
		os.Exit(1)
	}()
	return ctx
}
