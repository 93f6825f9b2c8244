package customization

import (
	"maps"

	"k8s.io/apimachinery/pkg/labels"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// Location is what rendering knows of a location: its name and its SyncTarget's labels (a nil
// map when there is no SyncTarget). Customizations select locations by Name and Labels, and
// CEL sees both as location.metadata.name and location.metadata.labels. Nothing else of the
// SyncTarget (its annotations, its status) reaches a tenant's expressions: labels are what
// Placements and LocationBindings select on, the rest is the administrator's (docs/tenancy.md,
// "What CEL sees of a location").
type Location struct {
	// Name is the location name (the SyncTarget's metadata.name).
	Name string
	// Labels are the SyncTarget's labels, the location's properties (region, zone, tier ...).
	Labels map[string]string
}

// LocationFromSyncTarget returns the Location of a SyncTarget. The label map is the
// SyncTarget's own (not copied): it may not be changed afterwards.
func LocationFromSyncTarget(st *controlv1alpha1.SyncTarget) Location {
	return Location{Name: st.Name, Labels: st.Labels}
}

// Equal reports whether l and o have the same name and labels (a nil map equals an empty one).
func (l Location) Equal(o Location) bool {
	return l.Name == o.Name && maps.Equal(l.Labels, o.Labels)
}

// locationInfo is a Location with what rendering derives from it once per snapshot.
type locationInfo struct {
	Location
	labels  labels.Set
	binding *locationBinding
}

// newLocation prepares l for rendering: its label set for selectors and its CEL value.
func newLocation(l Location) *locationInfo {
	return &locationInfo{
		Location: l,
		labels:   labels.Set(l.Labels),
		binding: &locationBinding{value: map[string]any{
			"metadata": map[string]any{
				"name":   l.Name,
				"labels": stringMap(l.Labels),
			},
		}},
	}
}

// stringMap returns m as the map[string]any CEL reads unstructured data as; never nil, so that
// `'region' in location.metadata.labels` works on a location without labels.
func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
