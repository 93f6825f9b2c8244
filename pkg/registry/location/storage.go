package location

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper"
	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
)

// Source gives the current per-location statistics. *cache.Cache implements it.
type Source interface {
	// Locations returns the statistics of every location with objects or watchers.
	Locations() map[string]cache.LocationStats
}

// REST is the storage of `locations`: get, list, watch and Table output; no writes.
type REST struct {
	source Source
	poller *poller
}

var (
	_ rest.Getter               = &REST{}
	_ rest.Lister               = &REST{}
	_ rest.Watcher              = &REST{}
	_ rest.Scoper               = &REST{}
	_ rest.SingularNameProvider = &REST{}
	_ rest.TableConvertor       = &REST{}
)

// NewREST returns the locations storage over source. Watches see changes within a second; call
// the returned REST's Destroy to stop its poller.
func NewREST(source Source) *REST {
	return &REST{source: source, poller: newPoller(source)}
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

// Get returns one location, 404 if it has neither objects nor watchers.
func (r *REST) Get(_ context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	stats, ok := r.source.Locations()[name]
	if !ok {
		return nil, apierrors.NewNotFound(mapper.Resource("locations"), name)
	}
	return toLocation(name, stats), nil
}

// List returns the locations, sorted by name, filtered by metadata.name field selectors.
func (r *REST) List(_ context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	items, rv := r.poller.current()
	list := &mapper.LocationList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(rv, 10)}}
	match := matcher(opts)
	for _, l := range items {
		if match(l) {
			list.Items = append(list.Items, *l)
		}
	}
	return list, nil
}

// Watch streams location changes: ADDED for every current location first (unless the request
// resumes at the current resourceVersion), then ADDED/MODIFIED/DELETED as counts change.
func (r *REST) Watch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	return r.poller.watch(ctx, opts.ResourceVersion, matcher(opts))
}

// ConvertToTable renders NAME, OBJECTS, WATCHERS and AGE.
func (r *REST) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "Name of the location"},
		{Name: "Objects", Type: "integer", Description: "Objects assigned to the location"},
		{Name: "Watchers", Type: "integer", Description: "Watches open on the location's view"},
		{Name: "Age", Type: "string", Description: "Time since an object was first seen assigned to the location"},
	}}
	var locs []*mapper.Location
	switch o := obj.(type) {
	case *mapper.Location:
		locs = []*mapper.Location{o}
	case *mapper.LocationList:
		for i := range o.Items {
			locs = append(locs, &o.Items[i])
		}
		table.ResourceVersion = o.ResourceVersion
	default:
		return nil, fmt.Errorf("cannot render %T as a table of locations", obj)
	}
	for _, l := range locs {
		table.Rows = append(table.Rows, metav1.TableRow{
			Cells:  []interface{}{l.Name, l.Status.Objects, l.Status.Watchers, age(l.Status.FirstSeen)},
			Object: runtime.RawExtension{Object: l},
		})
	}
	return table, nil
}

// toLocation builds the Location object of one location's statistics.
func toLocation(name string, s cache.LocationStats) *mapper.Location {
	l := &mapper.Location{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(s.FirstSeen)},
		Status: mapper.LocationStatus{
			Objects:   int64(s.Objects),
			Watchers:  int32(s.Watchers),
			FirstSeen: metav1.NewTime(s.FirstSeen),
		},
	}
	for gr, n := range s.Resources {
		l.Status.Resources = append(l.Status.Resources, mapper.ResourceCount{Group: gr.Group, Resource: gr.Resource, Objects: int64(n)})
	}
	sort.Slice(l.Status.Resources, func(i, j int) bool {
		a, b := l.Status.Resources[i], l.Status.Resources[j]
		return a.Group < b.Group || (a.Group == b.Group && a.Resource < b.Resource)
	})
	for c, n := range s.Clusters {
		l.Status.Clusters = append(l.Status.Clusters, mapper.ClusterCount{Name: c, Objects: int64(n)})
	}
	sort.Slice(l.Status.Clusters, func(i, j int) bool { return l.Status.Clusters[i].Name < l.Status.Clusters[j].Name })
	return l
}

// matcher applies a list request's label and field (metadata.name) selectors to a location.
func matcher(opts *metainternalversion.ListOptions) func(*mapper.Location) bool {
	label, field := labels.Everything(), fields.Everything()
	if opts != nil && opts.LabelSelector != nil {
		label = opts.LabelSelector
	}
	if opts != nil && opts.FieldSelector != nil {
		field = opts.FieldSelector
	}
	return func(l *mapper.Location) bool {
		return label.Matches(labels.Set(l.Labels)) && field.Matches(fields.Set{"metadata.name": l.Name})
	}
}

// age renders how long ago t was, as kubectl's AGE column does.
func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}
