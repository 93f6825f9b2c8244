package location

import (
	"context"
	"slices"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper"
	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
)

// Source gives the current per-location statistics of the index. *cache.Cache implements it.
type Source interface {
	// Locations returns the statistics of every location with objects or watchers.
	Locations() map[string]cache.LocationStats
}

// Config is what the locations storage reads.
type Config struct {
	// Stats are the index's statistics (required).
	Stats Source
	// Registry gives the SyncTargets and Leases; nil serves the index's locations only.
	Registry Registry
	// Resources gives the resources the server cannot list; nil reports none.
	Resources ResourceHealth
	// Failures gives the renderings that fail; nil reports none.
	Failures RenderFailures
}

// REST is the storage of `locations`: get, list, watch and Table output; no writes.
type REST struct {
	poller *poller
	// registrations: the server follows SyncTargets (Config.Registry), so lists and watches
	// show registered locations only, unless their field selector asks (matcher).
	registrations bool
}

var (
	_ rest.Getter               = &REST{}
	_ rest.Lister               = &REST{}
	_ rest.Watcher              = &REST{}
	_ rest.Scoper               = &REST{}
	_ rest.SingularNameProvider = &REST{}
	_ rest.TableConvertor       = &REST{}
)

// NewREST returns the locations storage over cfg. Watches see changes within a second; call
// the returned REST's Destroy to stop its poller.
func NewREST(cfg Config) *REST {
	registerMetrics()
	return &REST{poller: newPoller(builder{stats: cfg.Stats, registry: cfg.Registry, resources: cfg.Resources, failures: cfg.Failures}.locations), registrations: cfg.Registry != nil}
}

// New returns an empty Location.
func (r *REST) New() runtime.Object { return &mapper.Location{} }

// NewList returns an empty LocationList.
func (r *REST) NewList() runtime.Object { return &mapper.LocationList{} }

// Destroy stops the watch poller.
func (r *REST) Destroy() { r.poller.stop() }

// NamespaceScoped is false: locations are cluster-scoped.
func (r *REST) NamespaceScoped() bool { return false }

// GetSingularName returns "location".
func (r *REST) GetSingularName() string { return "location" }

// Get returns one location, registered or not, 404 if it is neither registered nor has
// objects or watchers.
func (r *REST) Get(_ context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	l, ok := r.poller.get(name)
	if !ok {
		return nil, apierrors.NewNotFound(mapper.Resource("locations"), name)
	}
	return l, nil
}

// List returns the locations, sorted by name, filtered by the label selector and the
// metadata.name and status.registered field selectors (see matcher).
func (r *REST) List(_ context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	items, rv := r.poller.current()
	list := &mapper.LocationList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(rv, 10)}}
	match := r.matcher(opts)
	for _, l := range items {
		if match(l) {
			list.Items = append(list.Items, *l)
		}
	}
	return list, nil
}

// Watch streams location changes: ADDED for every current location first (unless the request
// resumes at the current resourceVersion), then ADDED/MODIFIED/DELETED as counts change. A
// watch-list request (sendInitialEvents=true) gets the initial-events-end BOOKMARK after the
// ADDED events (poller.watch).
func (r *REST) Watch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	send := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	return r.poller.watch(ctx, opts.ResourceVersion, send, r.matcher(opts))
}

// matcher applies a list request's label and field (metadata.name, status.registered)
// selectors to a location. Unless the field selector names status.registered, a server that
// follows SyncTargets lists registered locations only: a name anyone can write into an
// assignment annotation does not make the list longer for everyone (docs/locations.md).
// `--field-selector status.registered=false` lists the others, the names with assigned
// objects or watchers but no SyncTarget (in the Bound location-access mode only the bound
// ones have objects); mapper_apiserver_unregistered_locations counts them.
func (r *REST) matcher(opts *metainternalversion.ListOptions) func(*mapper.Location) bool {
	label, field := labels.Everything(), fields.Everything()
	if opts != nil && opts.LabelSelector != nil {
		label = opts.LabelSelector
	}
	if opts != nil && opts.FieldSelector != nil {
		field = opts.FieldSelector
	}
	registeredOnly := r.registrations && !slices.ContainsFunc(field.Requirements(), func(req fields.Requirement) bool {
		return req.Field == v1alpha1.RegisteredFieldLabel
	})
	return func(l *mapper.Location) bool {
		if registeredOnly && !l.Status.Registered {
			return false
		}
		return label.Matches(labels.Set(l.Labels)) &&
			field.Matches(fields.Set{"metadata.name": l.Name, v1alpha1.RegisteredFieldLabel: strconv.FormatBool(l.Status.Registered)})
	}
}
