package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/procfs"
	"k8s.io/client-go/rest"
)

// procSample is a process's consumed CPU time and resident memory at one moment, read from
// /proc.
type procSample struct {
	CPU float64 // seconds of user+system time
	RSS int64   // bytes
	HWM int64   // peak RSS, bytes
	// RSSFile is the file-backed part of RSS (RssFile: the pages of the binary and libraries
	// read so far), bytes.
	RSSFile int64
}

// sampleProc reads /proc/<pid>/stat and /proc/<pid>/status.
func sampleProc(pid int) (procSample, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return procSample{}, err
	}
	st, err := p.Stat()
	if err != nil {
		return procSample{}, err
	}
	status, err := p.NewStatus()
	if err != nil {
		return procSample{}, err
	}
	return procSample{CPU: st.CPUTime(), RSS: int64(status.VmRSS), HWM: int64(status.VmHWM), RSSFile: int64(status.RssFile)}, nil
}

// stats summarises a sample of durations.
type stats struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// summarize returns the nearest-rank percentiles of xs (any unit).
func summarize(xs []float64) stats {
	if len(xs) == 0 {
		return stats{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return stats{N: len(s), P50: rank(0.50), P90: rank(0.90), P99: rank(0.99), Max: s[len(s)-1], Mean: sum / float64(len(s))}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// sharedClient returns an HTTP client for cfg without response compression (so that byte
// counts are payload sizes and neither side spends CPU on gzip).
func sharedClient(cfg *rest.Config) (*http.Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.DisableCompression = true
	cfg.QPS = -1
	return rest.HTTPClientFor(cfg)
}

// dedicatedClient returns an HTTP client with its own transport, hence its own connection, for
// cfg: a watcher that stands for one mapper process.
func dedicatedClient(cfg *rest.Config) (*http.Client, *http.Transport, error) {
	tlsConf, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	if tlsConf == nil {
		tlsConf = &tls.Config{}
	}
	tr := &http.Transport{
		TLSClientConfig:     tlsConf,
		ForceAttemptHTTP2:   true,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     30 * time.Second,
	}
	return &http.Client{Transport: tr}, tr, nil
}

// getResult is one measured GET.
type getResult struct {
	Status  int
	Bytes   int64
	Latency time.Duration // until the last byte of the body was read
	Body    []byte        // only when kept
}

// timedGet GETs url, reads the whole body and measures the time until its last byte.
func timedGet(ctx context.Context, c *http.Client, url string, keep bool) (getResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return getResult{}, err
	}
	req.Header.Set("Accept", "application/json")
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return getResult{}, err
	}
	defer resp.Body.Close()
	var res getResult
	if keep || resp.StatusCode != http.StatusOK {
		var buf bytes.Buffer
		n, err := io.Copy(&buf, resp.Body)
		if err != nil {
			return getResult{}, err
		}
		res.Body, res.Bytes = buf.Bytes(), n
	} else {
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			return getResult{}, err
		}
		res.Bytes = n
	}
	res.Latency = time.Since(start)
	res.Status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		return res, fmt.Errorf("GET %s: %s: %.300s", url, resp.Status, res.Body)
	}
	return res, nil
}

// metricOrNaN returns the value of the metric name in m (scrapeMetrics), NaN when absent.
func metricOrNaN(m map[string]float64, name string) float64 {
	if v, ok := m[name]; ok {
		return v
	}
	return math.NaN()
}

// scrapeMetrics reads a Prometheus text endpoint and sums every family over its series.
func scrapeMetrics(ctx context.Context, c *http.Client, url string) (map[string]float64, error) {
	fams, err := scrapeFamilies(ctx, c, url)
	if err != nil {
		return nil, err
	}
	// Sum every family over its series: the values used here are unlabelled or summed anyway.
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			out[name] += metricValue(m)
		}
	}
	return out, nil
}

// scrapeFamilies reads a Prometheus text endpoint into its metric families.
func scrapeFamilies(ctx context.Context, c *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// metricValue is the value of a gauge, counter or untyped series (0 for other types).
func metricValue(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// recv is one watch event as received by a watcher.
type recv struct {
	rv  uint64
	at  time.Time
	typ byte // 'A'dded, 'M'odified, 'D'eleted
}

// watchStream reads one open watch response: it counts bytes and frames and records the
// resourceVersion and arrival time of every non-bookmark event.
type watchStream struct {
	name string
	// resource is the watched resource (benchResource.name), where the watch set records it.
	resource string
	cancel   context.CancelFunc
	tr       *http.Transport
	opened   time.Time

	stopped   atomic.Bool
	bytes     atomic.Int64
	events    atomic.Int64
	bookmarks atomic.Int64
	lastRV    atomic.Uint64

	mu    sync.Mutex
	recvs []recv
	// waitRV and waitCh: waitCh is closed when an event with RV >= waitRV arrives.
	waitRV uint64
	waitCh chan struct{}

	done chan struct{}
	err  error
}

var (
	typeKey = []byte(`{"type":"`)
	rvKey   = []byte(`"resourceVersion":"`)
)

// openWatch starts a watch GET of url with client c and returns once the response headers
// arrived (the server has registered the watch). The stream is read in the background until
// stop or the end of the response.
func openWatch(ctx context.Context, name string, c *http.Client, tr *http.Transport, url string) (*watchStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("watch %s: %s: %s", url, resp.Status, b)
	}
	w := &watchStream{name: name, cancel: cancel, tr: tr, opened: time.Now(), done: make(chan struct{})}
	go w.read(resp.Body)
	return w, nil
}

// read parses the newline-delimited JSON watch frames. It only extracts the event type and the
// object's resourceVersion, which keeps the client's CPU share small.
func (w *watchStream) read(body io.ReadCloser) {
	defer close(w.done)
	defer body.Close()
	// Frames of one object fit; a longer one is put together below. Small, since scenario 2 holds
	// 10 watches per location open at once.
	br := bufio.NewReaderSize(body, 8<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			buf := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				buf = append(buf, line...)
			}
			line = buf
		}
		if len(line) > 0 {
			now := time.Now()
			w.bytes.Add(int64(len(line)))
			w.frame(line, now)
		}
		if err != nil {
			if err != io.EOF && !w.stopped.Load() {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
			}
			return
		}
	}
}

func (w *watchStream) frame(line []byte, now time.Time) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	if !bytes.HasPrefix(line, typeKey) || len(line) < len(typeKey)+1 {
		return
	}
	typ := line[len(typeKey)]
	var rv uint64
	if i := bytes.Index(line, rvKey); i >= 0 {
		rest := line[i+len(rvKey):]
		if j := bytes.IndexByte(rest, '"'); j > 0 {
			rv, _ = strconv.ParseUint(string(rest[:j]), 10, 64)
		}
	}
	if typ == 'B' {
		w.bookmarks.Add(1)
	} else if typ == 'E' { // ERROR, e.g. 410 Gone
		w.mu.Lock()
		w.err = fmt.Errorf("watch error event: %.300s", line)
		w.mu.Unlock()
		return
	} else {
		w.events.Add(1)
	}
	if rv > w.lastRV.Load() {
		w.lastRV.Store(rv)
	}
	w.mu.Lock()
	if typ != 'B' {
		w.recvs = append(w.recvs, recv{rv: rv, at: now, typ: typ})
	}
	if w.waitCh != nil && rv >= w.waitRV {
		close(w.waitCh)
		w.waitCh = nil
	}
	w.mu.Unlock()
}

// waitFor returns a channel closed once an event or bookmark with resourceVersion >= rv
// arrived.
func (w *watchStream) waitFor(rv uint64) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	if w.lastRV.Load() >= rv {
		close(ch)
		return ch
	}
	w.waitRV, w.waitCh = rv, ch
	return ch
}

// error returns the error that ended the stream early, if any.
func (w *watchStream) error() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// received returns a copy of the received events.
func (w *watchStream) received() []recv {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]recv(nil), w.recvs...)
}

// stop ends the watch and waits for the reader.
func (w *watchStream) stop() {
	w.stopped.Store(true)
	w.cancel()
	<-w.done
	if w.tr != nil {
		w.tr.CloseIdleConnections()
	}
}

// selfPID is the benchmark's own pid.
var selfPID = os.Getpid()
