package customization

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// RefusedRendering is one (object version, location) whose rendering was refused because it
// would change what a rendering may not change, or grow too large (pkg/rendercheck).
type RefusedRendering struct {
	// Cluster is the object's logical cluster; Object the object version.
	Cluster string
	Object  corev1.ObjectReference
	// Location is the location whose rendering was refused.
	Location string
	// Customization names the Customization refused (in the object's namespace), "" for the
	// object's own spec-diff.kcp.io/<location> patch.
	Customization string
	// Reason is the refusal's reason (rendercheck.ReasonProtectedFieldChanged or
	// rendercheck.ReasonTooLarge); Message says what was refused.
	Reason, Message string
}

// eventsResource is the resource of the Events EventWriter creates.
var eventsResource = eventsv1.SchemeGroupVersion.WithResource("events")

// Limits of an events.k8s.io/v1 Event (kube-apiserver's validation) and of the writer.
const (
	maxEventNote = 1024
	// eventQPS and eventBurst bound the Events one writer creates, so that a Customization
	// refused on many objects cannot flood the source: refusals over the budget are reported
	// in later rounds, while they last.
	eventQPS, eventBurst = 5, 50
	// eventAction is the Event's action.
	eventAction = "Render"
	// eventReportingController names the writer in its Events.
	eventReportingController = "mapper-apiserver"
)

// refusalKey identifies a refusal that was reported: one Event per object version, location,
// producer and reason.
type refusalKey struct {
	cluster, namespace, name string
	uid                      types.UID
	resourceVersion          string
	location, customization  string
	reason                   string
}

// EventWriter records a Warning Event on the source object for every rendering refused for
// changing a protected field or for its size (docs/customization.md, "What a rendering may
// not change"): once per object version, location and producer, while the refusal lasts, at
// most eventQPS Events per second. The Event names the location and the Customization (or
// the object's spec-diff.kcp.io/<location> patch) and says why; the Customization's status
// says it too (StatusWriter).
//
// It reads the refusals through a function and writes through a client of the object's
// logical cluster, so that it can run wherever the refusals are known. Today that is every
// replica of mapper-apiserver (each reports its own; the Events of two replicas are two
// Events); once mapper-controller learns the refusals, it belongs there, under its leader
// election, unchanged.
type EventWriter struct {
	refusals func() []RefusedRendering
	client   func(cluster string) (dynamic.Interface, error)
	interval time.Duration
	limiter  flowcontrol.RateLimiter
	instance string
	now      func() time.Time

	// reported are the refusals an Event was recorded for, pruned to the current ones. Only
	// Sync touches it; Sync runs in one goroutine.
	reported map[refusalKey]bool
}

// NewEventWriter returns an EventWriter for the refusals refusals returns, writing Events
// through client(cluster) (the source's client of that logical cluster), every interval.
func NewEventWriter(refusals func() []RefusedRendering, client func(cluster string) (dynamic.Interface, error), interval time.Duration) *EventWriter {
	host, _ := os.Hostname()
	if host == "" {
		host = eventReportingController
	}
	return &EventWriter{refusals: refusals, client: client, interval: interval,
		limiter: flowcontrol.NewTokenBucketRateLimiter(eventQPS, eventBurst), instance: host[:min(len(host), 128)],
		now: time.Now, reported: map[refusalKey]bool{}}
}

// Run records Events every interval until ctx ends.
func (w *EventWriter) Run(ctx context.Context) {
	wait.UntilWithContext(ctx, w.Sync, w.interval)
}

// Sync records an Event for each current refusal not reported yet, within the rate limit, and
// forgets the refusals that are gone; it returns after one round. A failed write is retried
// in the next round.
func (w *EventWriter) Sync(ctx context.Context) {
	current := w.refusals()
	seen := make(map[refusalKey]bool, len(current))
	for _, r := range current {
		k := refusalKey{cluster: r.Cluster, namespace: r.Object.Namespace, name: r.Object.Name, uid: r.Object.UID,
			resourceVersion: r.Object.ResourceVersion, location: r.Location, customization: r.Customization, reason: r.Reason}
		seen[k] = true
		if w.reported[k] || !w.limiter.TryAccept() {
			continue
		}
		if err := w.record(ctx, r); err != nil {
			klog.FromContext(ctx).Info("Recording an Event about a refused rendering failed; retrying", "cluster", r.Cluster,
				"object", r.Object.Namespace+"/"+r.Object.Name, "location", r.Location, "err", contract.Truncate(err.Error(), 512))
			if !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
				continue
			}
			// The namespace is gone, or Events cannot be written there: retrying every round
			// would not help.
		}
		w.reported[k] = true
	}
	for k := range w.reported {
		if !seen[k] {
			delete(w.reported, k)
		}
	}
}

// record creates the Event of r in the object's namespace ("default" for a cluster-scoped
// object, as client-go's recorders do).
func (w *EventWriter) record(ctx context.Context, r RefusedRendering) error {
	client, err := w.client(r.Cluster)
	if err != nil {
		return err
	}
	ns := r.Object.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	now := w.now()
	by := "its spec-diff.kcp.io/" + r.Location + " patch"
	if r.Customization != "" {
		by = "Customization " + r.Customization
	}
	ev := &eventsv1.Event{
		TypeMeta:            metav1.TypeMeta{APIVersion: eventsv1.SchemeGroupVersion.String(), Kind: "Event"},
		ObjectMeta:          metav1.ObjectMeta{Name: eventName(r.Object.Name, now), Namespace: ns},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: eventReportingController,
		ReportingInstance:   w.instance,
		Action:              eventAction,
		Reason:              r.Reason,
		Regarding:           r.Object,
		Note: contract.Truncate(fmt.Sprintf("The rendering for location %s by %s was refused; the location keeps its last rendering, or does not show this version: %s",
			r.Location, by, r.Message), maxEventNote-32), // Truncate adds up to 32 bytes
		Type: corev1.EventTypeWarning,
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ev)
	if err != nil {
		return err
	}
	_, err = client.Resource(eventsResource).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	return err
}

// eventName is the name of an Event about the object name at now, "<name>.<nanoseconds in
// hex>" as client-go's recorders name theirs, the name cut to leave room for the suffix.
func eventName(name string, now time.Time) string {
	name = strings.TrimRight(name[:min(len(name), 200)], "-.")
	return fmt.Sprintf("%s.%x", name, now.UnixNano())
}
