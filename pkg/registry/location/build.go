package location

import (
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/apis/mapper"
	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
)

// builder composes the Locations from the index's statistics, the registrations (SyncTargets
// and Leases), the server's unsynced resources and the renderings that fail. registry,
// resources and failures may be nil.
type builder struct {
	stats     Source
	registry  Registry
	resources ResourceHealth
	failures  RenderFailures
}

// locations returns one Location per location that has objects or watchers in the index or a
// SyncTarget, by name. The objects are new; UnsyncedResources is one slice shared by all.
func (b builder) locations() map[string]*mapper.Location {
	stats := b.stats.Locations()
	out := make(map[string]*mapper.Location, len(stats))
	for name, s := range stats {
		out[name] = toLocation(name, s)
	}
	if b.registry != nil {
		for _, st := range b.registry.SyncTargets() {
			l, ok := out[st.Name]
			if !ok {
				l = &mapper.Location{ObjectMeta: metav1.ObjectMeta{Name: st.Name}}
				out[st.Name] = l
			}
			register(l, st)
		}
		unregistered := 0
		for _, l := range out {
			if !l.Status.Registered {
				unregistered++
			}
		}
		unregisteredLocations.Set(float64(unregistered))
		for name, l := range out {
			if t := b.registry.RenewTime(name); t != nil {
				renewed := *t
				l.Status.HeartbeatTime = &renewed
			}
		}
	}
	if b.resources != nil {
		if unsynced := b.resources.UnsyncedResources(); len(unsynced) > 0 {
			for _, l := range out {
				l.Status.UnsyncedResources = unsynced
			}
		}
	}
	if b.failures != nil {
		for name, failures := range customizationFailures(b.failures.RenderFailures()) {
			if l := out[name]; l != nil { // a failing object is assigned: its location has stats
				l.Status.CustomizationFailures = failures
			}
		}
	}
	return out
}

// toLocation builds the Location object of one location's statistics in the index.
func toLocation(name string, s cache.LocationStats) *mapper.Location {
	l := &mapper.Location{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(s.FirstSeen)},
		Status: mapper.LocationStatus{
			Objects:   int64(s.Objects),
			Deleting:  int64(s.Deleting),
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

// register copies what the SyncTarget st says about the location into l: its labels and
// creation timestamp (a registered location is as old as its SyncTarget), its conditions,
// mapper, verified counts and capacity.
func register(l *mapper.Location, st *controlv1alpha1.SyncTarget) {
	st = st.DeepCopy()
	l.Labels = st.Labels
	l.CreationTimestamp = st.CreationTimestamp
	l.Status.Registered = true
	l.Status.Conditions = st.Status.Conditions
	l.Status.Capacity = st.Status.Capacity
	l.Status.Paused = st.Spec.Paused
	l.Status.HaltedResources = st.Spec.HaltedResources
	if m := st.Status.Mapper; m != nil {
		l.Status.Mapper = &mapper.LocationMapper{Identity: m.Identity, Version: m.Version, Mode: m.Mode}
	}
	if o := st.Status.Objects; o != nil {
		l.Status.Verified = &mapper.VerifiedObjects{Assigned: o.Assigned, InSync: o.InSync, InViolation: o.InViolation, VerifiedTime: o.VerifiedTime}
	}
}
