package bench

import (
	"context"

	dto "github.com/prometheus/client_model/go"
)

// requestDurations is mapper-apiserver's own account of how long it took to serve view requests:
// the cumulative buckets of apiserver_request_duration_seconds (k8s.io/apiserver's histogram,
// from a request's arrival at the handler chain until its handler returned, that is until the
// response was handed to the HTTP/2 server) over the series of locations/proxy, every verb.
type requestDurations struct {
	count   uint64
	buckets map[float64]uint64 // upper bound in seconds → requests at most that long
}

// viewRequestDurations scrapes mapper-apiserver's request durations of view requests; ok is
// false when they cannot be read.
func (e *env) viewRequestDurations(ctx context.Context) (requestDurations, bool) {
	fams, err := scrapeFamilies(ctx, e.maHTTP, e.mapper.URL+"/metrics")
	if err != nil {
		e.logf("reading mapper-apiserver metrics: %v", err)
		return requestDurations{}, false
	}
	return proxyDurations(fams["apiserver_request_duration_seconds"]), true
}

// proxyDurations sums the histogram series of f whose resource is locations and subresource
// proxy (the view requests).
func proxyDurations(f *dto.MetricFamily) requestDurations {
	d := requestDurations{buckets: map[float64]uint64{}}
	if f == nil {
		return d
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		h := m.GetHistogram()
		if h == nil || labels["resource"] != "locations" || labels["subresource"] != "proxy" {
			continue
		}
		d.count += h.GetSampleCount()
		for _, b := range h.GetBucket() {
			d.buckets[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	return d
}

// since returns the requests of d that were not yet in before: how many, and how many took at
// most bound seconds (bound must be a bucket's upper bound; ok is false otherwise).
func (d requestDurations) since(before requestDurations, bound float64) (n, within uint64, ok bool) {
	b, ok1 := d.buckets[bound]
	a, ok2 := before.buckets[bound]
	if !ok1 || (!ok2 && before.count > 0) {
		return d.count - before.count, 0, false
	}
	return d.count - before.count, b - a, true
}
