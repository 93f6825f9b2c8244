package cache

import (
	"bytes"
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// An object assigned to several locations has one view per location, and most such views
// differ in one value only: kcp.io/assigned-locations, which names the location alone
// (["<location>"]) where the source names them all. For such an object the cache keeps one
// JSON encoding, the object's own, and makes a location's view from it by replacing that value
// (a copy of bytes, no decoding, rendering or encoding): so an object costs its JSON once,
// not once per location, and the first LIST of a location copies bytes.
//
// The views of an object are "the object with its assignment value replaced" exactly when
// nothing else in them depends on the location (templatable):
//   - no annotation is hidden from some view (status records, spec-diff.kcp.io/ patches,
//     kcp.io/status-location, kubectl's last-applied-configuration: hiddenAnnotation);
//   - its .status is the same in every view (not statusDiffers);
//   - no Customization or patch renders it (no rendered or failed location);
//   - every view shows the object's own resourceVersion (visible is nil).
// Everything else a view does to the object (dropping managedFields, done at ingest) is the
// same for every location. TestTemplateViewsMatchRendering checks the bytes against the
// rendering for every location.

// assignmentHole is the byte range, in an Object's JSON, of the JSON string that is the value
// of its metadata.annotations[kcp.io/assigned-locations].
type assignmentHole struct{ start, end int }

// templatable reports whether every view of o (u is its content) is o's JSON with the
// assignment value replaced (see above). Called by compact, before o is published.
func (o *Object) templatable(u *unstructured.Unstructured) bool {
	if o.statusDiffers || o.rendered != nil || o.failed != nil || o.visible != nil || len(o.locations) < 2 {
		return false
	}
	for k, v := range u.GetAnnotations() {
		if hiddenAnnotation(k, v, "") {
			return false
		}
	}
	return true
}

// assignmentKey is the encoded key of kcp.io/assigned-locations with its colon, as
// encoding/json writes it in an object: "kcp.io/assigned-locations":
var assignmentKey = []byte(`"` + contract.AssignedLocationsAnnotation + `":`)

// findAssignmentHole returns where, in raw (an object's JSON), the value of its
// kcp.io/assigned-locations annotation is; value is that annotation's value. ok is false unless
// the key and its value occur exactly once in raw (a nested object could carry the same key and
// value; then the object keeps rendered views). raw may be the cache's encoding or the source's
// own bytes: both write the value as encoding/json does, since the JSON of a string is the same
// in every encoder that escapes HTML characters, as Kubernetes API servers and encoding/json do.
func findAssignmentHole(value string, raw []byte) (assignmentHole, bool) {
	return findStringMember(assignmentKey, value, raw)
}

// findStringMember returns where, in raw, the JSON string value is as the value of the member
// whose encoded key and colon are key; ok is false unless the member occurs exactly once.
func findStringMember(key []byte, value string, raw []byte) (assignmentHole, bool) {
	val, err := json.Marshal(value)
	if err != nil {
		return assignmentHole{}, false
	}
	needle := append(append([]byte(nil), key...), val...)
	i := bytes.Index(raw, needle)
	if i < 0 || bytes.Index(raw[i+1:], needle) >= 0 {
		return assignmentHole{}, false
	}
	start := i + len(key)
	return assignmentHole{start: start, end: start + len(val)}, true
}

// templateView returns location's view of o, made from o's JSON: the bytes with the
// assignment value replaced by ["<location>"]. o.hole must be set (compact). The view holds no
// bytes of its own: its JSON is written from o's in three pieces (WriteJSON), so a view costs
// its Object, not a copy of the object, however many locations list it.
func (o *Object) templateView(location string) *Object {
	fill, _ := json.Marshal(assignedToOnly(location))
	v := o.viewFromJSON(nil, o.rv, o.rvString, o.generation)
	v.base, v.fill = o, fill
	return v
}

// templatePieces returns the three pieces of a template view's JSON (o.base must be set).
func (o *Object) templatePieces() (head, fill, tail []byte) {
	b := o.base
	return b.json[:b.hole.start], o.fill, b.json[b.hole.end:]
}

// viewFromJSON returns a view of o (ForLocation) whose JSON is raw, showing resourceVersion rv
// (rvString) and metadata.generation generation, kept as bytes only.
func (o *Object) viewFromJSON(raw []byte, rv uint64, rvString string, generation int64) *Object {
	v := &Object{
		key: o.key, cluster: o.cluster, namespace: o.namespace, name: o.name, uid: o.uid,
		typeMeta: o.typeMeta, locations: o.locations, assigned: o.assigned,
		rv: rv, rvString: rvString, sourceRV: o.rv, generation: generation, labels: o.labels,
	}
	if raw != nil {
		v.jsonOnce.Do(func() { v.json = raw })
	}
	return v
}
