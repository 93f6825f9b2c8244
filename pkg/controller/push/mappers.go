package push

import (
	"context"
	"sync"

	"k8s.io/klog/v2"
)

// Reasons of starts and stops (metrics, Events and logs) besides the Ready reasons.
const (
	reasonStarted           = "Started"
	reasonKubeconfigChanged = "KubeconfigChanged"
	reasonExited            = "Exited"
	reasonDeleted           = "SyncTargetDeleted"
	reasonPullMode          = "PullMode"
	reasonShutdown          = "Shutdown"
)

// running is one in-process mapper.
type running struct {
	// hash identifies the kubeconfig it runs with.
	hash   string
	cancel context.CancelFunc
	// done is closed when the mapper has stopped; err is then its error.
	done chan struct{}
	err  error
}

// exited reports whether the mapper stopped by itself.
func (r *running) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// mappers are the in-process mappers by location.
type mappers struct {
	mu      sync.Mutex
	running map[string]*running
	wg      sync.WaitGroup
}

func newMappers() *mappers { return &mappers{running: map[string]*running{}} }

// get returns the location's mapper, or nil.
func (m *mappers) get(location string) *running {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running[location]
}

// start runs run in a new goroutine as location's mapper, under ctx, with the kubeconfig
// hash; the location must have no mapper (stop it first). onExit is called when run
// returns by itself (not stopped).
func (m *mappers) start(ctx context.Context, location, hash string, run func(context.Context) error, onExit func(error)) {
	ctx, cancel := context.WithCancel(ctx)
	r := &running{hash: hash, cancel: cancel, done: make(chan struct{})}
	m.mu.Lock()
	m.running[location] = r
	m.mu.Unlock()
	mappersRunning.Inc()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		r.err = run(ctx)
		stopped := ctx.Err() != nil
		close(r.done)
		if !stopped && onExit != nil {
			onExit(r.err)
		}
	}()
}

// stop cancels location's mapper and waits until it has stopped (its heartbeat too, so
// that nothing writes the location's status for it afterwards). It reports whether a mapper
// was there (running or exited).
func (m *mappers) stop(ctx context.Context, location, reason string) bool {
	m.mu.Lock()
	r := m.running[location]
	delete(m.running, location)
	m.mu.Unlock()
	if r == nil {
		return false
	}
	r.cancel()
	<-r.done
	mappersRunning.Dec()
	mapperStops.WithLabelValues(location, reason).Inc()
	klog.FromContext(ctx).Info("Stopped the in-process mapper; its copies stay on the target", "location", location, "reason", reason)
	return true
}

// stopAll stops every mapper (mapper-controller shuts down or loses leadership) and waits
// for all of them.
func (m *mappers) stopAll(ctx context.Context) {
	m.mu.Lock()
	var locations []string
	for l := range m.running {
		locations = append(locations, l)
	}
	m.mu.Unlock()
	for _, l := range locations {
		m.stop(ctx, l, reasonShutdown)
	}
	m.wg.Wait()
}
