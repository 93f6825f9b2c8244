package cache

import (
	"encoding/json"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cluster-mapper/cluster-mapper/pkg/rawjson"
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
//   - every view shows the object's own generation (no VisibleGeneration older);
//   - no view shows a deletion the source object does not show (deletionMarks.sameInEveryView).
// Two more parts may differ per location, and are holes of the template as well (templateHoles):
// metadata.finalizers, where a view leaves out other locations' finalizers (deletion.go), and
// metadata.resourceVersion, where a view shows its visible resourceVersion (visible.go: after a
// location added its finalizer, the other locations' views did not change).
// Everything else a view does to the object (dropping managedFields, done at ingest) is the
// same for every location. TestTemplateViewsMatchRendering checks the bytes against the
// rendering for every location.

// assignmentHole is the byte range, in an Object's JSON, of the JSON string that is the value
// of its metadata.annotations[kcp.io/assigned-locations].
type assignmentHole struct{ start, end int }

// templatable reports whether every view of o (u is its content) is o's JSON with the
// assignment value replaced (see above). Called by compact, before o is published.
func (o *Object) templatable(u *unstructured.Unstructured) bool {
	if o.statusDiffers || o.rendered != nil || o.failed != nil || len(o.assigned) < 2 ||
		len(o.locations) != len(o.assigned) || !o.marks.sameInEveryView(o.assigned) {
		return false
	}
	if o.visible != nil {
		for _, loc := range o.locations {
			if _, older := o.VisibleGeneration(loc); older {
				return false
			}
		}
	}
	for k, v := range u.GetAnnotations() {
		if hiddenAnnotation(k, v, "") {
			return false
		}
	}
	return true
}

// findAssignmentHole returns where, in raw (an object's JSON), the value of its
// metadata.annotations[kcp.io/assigned-locations] is. The value is found by walking the object
// (rawjson.ValueRange), whatever the spacing and escapes of the text: never by searching for
// its bytes, which a nested field holding the same key and value would match instead, so
// that every location's view would show the real annotation, with every location's name. ok
// is false when raw has no such annotation or is not an object that walks (a member on the
// path twice, which ingest rejects: then the object keeps rendered views).
func findAssignmentHole(raw []byte) (assignmentHole, bool) {
	return findValue(raw, assignmentPath...)
}

// findValue returns where, in raw, the string value at path is (rawjson.ValueRange); ok is
// false when there is none or it is not a JSON string.
func findValue(raw []byte, path ...string) (assignmentHole, bool) {
	start, end, found, err := rawjson.ValueRange(raw, path...)
	if err != nil || !found || raw[start] != '"' {
		return assignmentHole{}, false
	}
	return assignmentHole{start: start, end: end}, true
}

// templateView returns location's view of o, made from o's JSON: the bytes with the
// assignment value replaced by ["<location>"] (and the other holes filled, templateHoles). o.hole
// must be set (compact). The view holds no copy of o's bytes: its JSON is written from o's in
// pieces (WriteJSON), so a view costs its Object and its fills, not a copy of the object,
// however many locations list it.
func (o *Object) templateView(location string) *Object {
	fill, _ := json.Marshal(assignedToOnly(location))
	rv := o.VisibleResourceVersion(location)
	rvString := o.rvString
	if rv != o.rv {
		rvString = strconv.FormatUint(rv, 10)
	}
	v := o.viewFromJSON(rawjson.Compact{}, rv, rvString, o.generation)
	v.base, v.fill = o, fill
	if o.more != nil {
		v.more = o.more.fillsFor(o, location, rvString)
	}
	return v
}

// templateHoles are the holes of a template besides its assignment value (on the template
// Object), or a template view's fills of them (on the view): each hole is set when end > 0.
type templateHoles struct {
	// finalizers is the metadata.finalizers member with one separating comma
	// (rawjson.MemberSpan's cut): a view leaves out other locations' finalizers, and the
	// member when none is left. finalizersValue is the member's value.
	finalizers, finalizersValue assignmentHole
	// resourceVersion is the value of metadata.resourceVersion: a view shows its visible
	// resourceVersion.
	resourceVersion assignmentHole
	// finalizersFill and resourceVersionFill are a view's fills of the holes.
	finalizersFill, resourceVersionFill []byte
}

// finalizersKey is the encoded key of metadata.finalizers with its colon, as a fill writes it.
var finalizersKey = []byte(`"finalizers":`)

// findMoreHoles returns the holes of o's template besides the assignment value (raw is o's
// JSON): the finalizers member when some view leaves out a location's finalizer, the
// resourceVersion value when some view shows an older one. Both are found by walking the
// object (rawjson.MemberRange), as the assignment value is. It returns nil when there is
// neither, and ok false when a hole cannot be found (o then keeps rendered views).
func (o *Object) findMoreHoles(raw []byte) (more *templateHoles, ok bool) {
	needFinalizers := o.marks != nil && len(o.marks.finalized) > 0
	if !needFinalizers && o.visible == nil {
		return nil, true
	}
	more = &templateHoles{}
	if needFinalizers {
		m, has, err := rawjson.MemberRange(raw, "metadata", "finalizers")
		if err != nil || !has || raw[m.ValueStart] != '[' {
			return nil, false
		}
		more.finalizers = assignmentHole{start: m.CutStart, end: m.CutEnd}
		more.finalizersValue = assignmentHole{start: m.ValueStart, end: m.End}
	}
	if o.visible != nil {
		if more.resourceVersion, ok = findValue(raw, "metadata", "resourceVersion"); !ok {
			return nil, false
		}
	}
	return more, true
}

// fillsFor returns the fills of location's view of o, the template whose holes h are, showing
// resourceVersion rvString.
func (h *templateHoles) fillsFor(o *Object, location, rvString string) *templateHoles {
	f := &templateHoles{}
	if h.finalizers.end > 0 {
		// The cut holds the comma before the member (lead), else the one after it (trail).
		raw := o.json.Bytes()
		member := raw[h.finalizers.start:h.finalizers.end]
		lead, trail := member[0] == ',', member[len(member)-1] == ','
		var finalizers []string
		// The value is the source's JSON array of strings: it decodes (ingest read it as
		// metadata.finalizers of an object that decodes).
		_ = json.Unmarshal(raw[h.finalizersValue.start:h.finalizersValue.end], &finalizers)
		if shown := viewFinalizers(finalizers, location); len(shown) > 0 {
			list, _ := json.Marshal(shown)
			if lead {
				f.finalizersFill = append(f.finalizersFill, ',')
			}
			f.finalizersFill = append(append(f.finalizersFill, finalizersKey...), list...)
			if trail {
				f.finalizersFill = append(f.finalizersFill, ',')
			}
		} else {
			f.finalizersFill = []byte{}
		}
	}
	if h.resourceVersion.end > 0 {
		f.resourceVersionFill, _ = json.Marshal(rvString)
	}
	return f
}

// templatePieces calls write with each piece of a template view's JSON (o.base must be set), in
// order, and returns write's first error.
func (o *Object) templatePieces(write func([]byte) error) error {
	b := o.base
	type cut struct {
		hole assignmentHole
		fill []byte
	}
	cuts := [3]cut{{hole: b.hole, fill: o.fill}}
	n := 1
	if b.more != nil && o.more != nil {
		if b.more.finalizers.end > 0 {
			cuts[n] = cut{b.more.finalizers, o.more.finalizersFill}
			n++
		}
		if b.more.resourceVersion.end > 0 {
			cuts[n] = cut{b.more.resourceVersion, o.more.resourceVersionFill}
			n++
		}
	}
	for i := 1; i < n; i++ { // insertion sort of at most three
		for j := i; j > 0 && cuts[j].hole.start < cuts[j-1].hole.start; j-- {
			cuts[j], cuts[j-1] = cuts[j-1], cuts[j]
		}
	}
	raw, next := b.json.Bytes(), 0
	for _, c := range cuts[:n] {
		if err := write(raw[next:c.hole.start]); err != nil {
			return err
		}
		if err := write(c.fill); err != nil {
			return err
		}
		next = c.hole.end
	}
	return write(raw[next:])
}

// templateSize returns the length of a template view's JSON (o.base must be set).
func (o *Object) templateSize() int {
	n := 0
	_ = o.templatePieces(func(p []byte) error {
		n += len(p)
		return nil
	})
	return n
}

// viewFromJSON returns a view of o (ForLocation) whose JSON is raw, showing resourceVersion rv
// (rvString) and metadata.generation generation, kept as bytes only.
func (o *Object) viewFromJSON(raw rawjson.Compact, rv uint64, rvString string, generation int64) *Object {
	v := &Object{
		key: o.key, cluster: o.cluster, namespace: o.namespace, name: o.name, uid: o.uid,
		typeMeta: o.typeMeta, locations: o.locations, assigned: o.assigned, marks: o.marks,
		rv: rv, rvString: rvString, sourceRV: o.rv, generation: generation, labels: o.labels,
	}
	if !raw.IsZero() {
		v.jsonOnce.Do(func() { v.json = raw })
	}
	return v
}
