package cache

import (
	"encoding/json"
	"strings"
	"sync"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// StatusRecord returns the status recorded for location on u (the JSON of
// status.kcp.io/<location>), whether there is such a record, and an error when it is not a
// JSON object.
func StatusRecord(u *unstructured.Unstructured, location string) (map[string]interface{}, bool, error) {
	raw, ok := u.GetAnnotations()[contract.StatusRecordAnnotationPrefix+location]
	if !ok {
		return nil, false, nil
	}
	var status map[string]interface{}
	if err := json.Unmarshal([]byte(raw), &status); err != nil {
		return nil, true, err
	}
	return status, true, nil
}

// StatusRecordLocations returns the locations that have a status record on u.
func StatusRecordLocations(u *unstructured.Unstructured) []string {
	var out []string
	for k := range u.GetAnnotations() {
		if loc, ok := strings.CutPrefix(k, contract.StatusRecordAnnotationPrefix); ok {
			out = append(out, loc)
		}
	}
	return out
}

// ReflectsStatus reports whether u opted in to status write-back (contract.ReflectsStatus).
func ReflectsStatus(u *unstructured.Unstructured) bool {
	return contract.ReflectsStatus(u.GetAnnotations())
}

// LocationView returns a copy of u (a source object assigned to locations) as location's view
// shows it, by the rule of Object.ForLocation. The status write path and the cache share it.
func LocationView(u *unstructured.Unstructured, locations []string, location string) *unstructured.Unstructured {
	u = u.DeepCopy()
	status, ok, err := StatusRecord(u, location)
	switch {
	case ok && err == nil:
		u.Object["status"] = status
	case len(locations) > 1:
		delete(u.Object, "status")
	}
	ann := u.GetAnnotations()
	for _, loc := range StatusRecordLocations(u) {
		delete(ann, contract.StatusRecordAnnotationPrefix+loc)
	}
	u.SetAnnotations(ann)
	return u
}

// locationVariants holds the per-location views of one object version that needs them.
type locationVariants struct {
	mu sync.Mutex
	m  map[string]*Object
}

// needsVariants reports whether the object looks different per location: it carries status
// records, or reflects status while assigned to several locations (then .status is some
// location's, or nobody's).
func needsVariants(u *unstructured.Unstructured, locations []string) bool {
	return len(StatusRecordLocations(u)) > 0 || (ReflectsStatus(u) && len(locations) > 1)
}

// ForLocation returns the object as location's view shows it (DESIGN.md, issue "Status
// write-back"): a location sees its own status in .status and never another location's. For
// most objects that is the object itself. For one that carries status records
// (status.kcp.io/<location>) or reflects status while assigned to several locations, it is a
// copy, built once per location and object version, in which
//   - .status is location's record if there is one; otherwise the source's .status when the
//     object is assigned to that location alone, and no .status when it is assigned to several;
//   - no status.kcp.io/ annotation is left.
//
// A record that is not a JSON object counts as no record.
func (o *Object) ForLocation(location string) *Object {
	if o.variants == nil {
		return o
	}
	o.variants.mu.Lock()
	defer o.variants.mu.Unlock()
	if v, ok := o.variants.m[location]; ok {
		return v
	}
	u := LocationView(o.u, o.locations, location)
	v := newObject(o.key, o.cluster, o.namespace, o.name, o.locations, o.rv, u)
	v.variants = nil
	if o.variants.m == nil {
		o.variants.m = map[string]*Object{}
	}
	o.variants.m[location] = v
	return v
}

// StatusObjects returns the objects whose view differs per location: those carrying status
// records (status.kcp.io/<location>) or reflecting status while assigned to several
// locations. The status record reconciler visits only these; their number does not grow with
// the cache's total.
func (s *ResourceStore) StatusObjects() []*Object {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*Object, 0, len(s.statusObjects))
	for _, o := range s.statusObjects {
		out = append(out, o)
	}
	return out
}
