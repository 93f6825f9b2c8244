package view

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	unprovenConsistentReads = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "mapper_apiserver",
		Subsystem:      "view",
		Name:           "unproven_consistent_reads_total",
		Help:           "Reads with resourceVersion \"\" served before the cache could prove it reached the source's current resourceVersion (see docs/views.md), by resource.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})

	statusWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "mapper_apiserver",
		Subsystem:      "view",
		Name:           "status_writes_total",
		Help:           "Status writes through location views, by resource and result (the HTTP status code answered).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource", "code"})

	statusWriteDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      "mapper_apiserver",
		Subsystem:      "view",
		Name:           "status_write_duration_seconds",
		Help:           "Time a status write through a location view took, including its round trips to the source, by resource.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 14),
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})

	markWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "mapper_apiserver",
		Subsystem:      "view",
		Name:           "finalizer_writes_total",
		Help:           "Writes of a location's own marks on an object through location views (docs/views.md, \"Writes\"), by resource, change (add and remove of its finalizer, outcome-set and outcome-remove of its outcome record, none) and result (the HTTP status code answered).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource", "change", "code"})

	relatedWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "mapper_apiserver",
		Subsystem:      "view",
		Name:           "related_writes_total",
		Help:           "Creates and deletes through location views, and updates of related copies (docs/views.md, \"Related copies\"), by resource, verb (create, update, delete) and result (the HTTP status code answered).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource", "verb", "code"})

	registerOnce sync.Once
)

// observeRelatedWrite records one create or delete through a view, or update of a related copy,
// and its result.
func observeRelatedWrite(gr schema.GroupResource, verb string, err error) {
	relatedWrites.WithLabelValues(gr.String(), verb, strconv.Itoa(codeOf(err))).Inc()
}

// observeMarkWrite records one write of a location's own marks: what it changed (the finalizer
// first, as a write that adds it and sets a record counts as an add) and its result.
func observeMarkWrite(gr schema.GroupResource, change markChange, err error) {
	what := "none"
	switch {
	case change.finalizer > 0:
		what = "add"
	case change.finalizer < 0:
		what = "remove"
	case change.outcome > 0:
		what = "outcome-set"
	case change.outcome < 0:
		what = "outcome-remove"
	}
	markWrites.WithLabelValues(gr.String(), what, strconv.Itoa(codeOf(err))).Inc()
}

// codeOf is the HTTP status code a request answered with err (nil: 200).
func codeOf(err error) int {
	if s, ok := err.(apierrors.APIStatus); ok {
		return int(s.Status().Code)
	} else if err != nil {
		return http.StatusInternalServerError
	}
	return http.StatusOK
}

// observeStatusWrite records one status write: its result and how long it took.
func observeStatusWrite(gr schema.GroupResource, err error, took time.Duration) {
	statusWrites.WithLabelValues(gr.String(), strconv.Itoa(codeOf(err))).Inc()
	statusWriteDuration.WithLabelValues(gr.String()).Observe(took.Seconds())
}

// RegisterMetrics registers the view's metrics with the legacy registry (served at /metrics).
// It is safe to call more than once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(unprovenConsistentReads, statusWrites, statusWriteDuration, markWrites, relatedWrites)
	})
}
