package cache

import (
	"bytes"
	"slices"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/rawjson"
)

// An object version that arrives as bytes (a source.Object, from the source's object client) is
// stored without ever being decoded when its views are the object itself, or the object with
// its assignment value replaced (a template, template.go): the cache then keeps the source's
// JSON (with kcp.io/cluster inserted on a plain source, by the object client as it reads the
// bytes, else here) and the metadata the source's decoder read. This is the common case, and the whole first list of a resource takes this path, so
// start-up builds no tree of maps per object ("decode metadata only, from the
// bytes the source sent"). Every other version is decoded (identity.tree) and takes the
// rendering path (newObject, settleRendering, compact), exactly as a decoded object does.

// buildFromJSON returns the Object of id, a version that arrived as bytes, assigned to locs at
// resourceVersion rv, made from its JSON without decoding it; nil when the version needs
// decoding (jsonSuffices). prev is the stored version before it (nil for a new object).
func (s *ResourceStore) buildFromJSON(id identity, prev *Object, locs []string, rv uint64) *Object {
	if !s.jsonSuffices(id, prev, locs) {
		return nil
	}
	raw, ok := sourceBytes(id)
	if !ok {
		return nil
	}
	o := &Object{
		key: id.key, cluster: id.cluster, namespace: s.intern.Get(id.namespace), name: id.name, uid: id.uid,
		typeMeta:  id.raw.TypeMeta,
		locations: id.marks.viewLocations(locs, locs), assigned: locs, marks: id.marks,
		rv: rv, rvString: id.rvString, sourceRV: rv, generation: id.raw.Generation,
		labels: newObjectLabels(id.raw.Labels, s.intern.Get),
		edit:   id.edit,
	}
	if o.typeMeta == s.typeMeta {
		o.typeMeta = s.typeMeta
	}
	o.jsonOnce.Do(func() { o.json = raw })
	if len(locs) > 1 {
		h, ok := findAssignmentHole(raw.Bytes())
		if !ok {
			return nil
		}
		more, ok := o.findMoreHoles(raw.Bytes())
		if !ok {
			return nil
		}
		o.variants, o.hole, o.more = &locationVariants{}, h, more
	}
	if prev != nil && (prev.variants != nil || prev.generation != o.generation) {
		// The views of prev are templates (templateSuccessor), or prev and o are each shown as
		// they are to one location and o moves metadata.generation: which views changed is
		// then what setVisibility would find by decoding both versions, unless the bytes show
		// it first.
		switch {
		case !slices.ContainsFunc(locs, prev.HasLocation):
			o.everyViewChanged = true // no location stays: every view is new
		case changedOutsideHoles(prev, o):
			o.everyViewChanged = true
		case prev.variants != nil:
			// A change of the assignment alone (which leaves the views of the locations that
			// stay unchanged), or of .status alone at a new generation (which they show at
			// their old generation): decoded, so that setVisibility can record it.
			return nil
		}
	}
	o.sourceJSON = true
	return o
}

// sourceBytes returns the JSON of id, a version that arrived as bytes, as views show it: the
// source's bytes, with kcp.io/cluster on a plain source (added by the object client, else
// here). ok is false for a version that has its own kcp.io/cluster on a plain source (the
// cache replaces it: the bytes are not what views show) and for one that did not arrive as
// bytes.
func sourceBytes(id identity) (raw rawjson.Compact, ok bool) {
	if id.raw == nil || (id.edit != nil && id.edit.had) {
		return rawjson.Compact{}, false
	}
	raw = id.raw.JSON()
	if id.edit != nil && !id.editedJSON {
		var err error
		if raw, err = id.raw.WithAnnotation(contract.ClusterAnnotation, id.cluster); err != nil {
			return rawjson.Compact{}, false
		}
	}
	return raw, true
}

// templateSuccessor reports whether a version assigned to locs may be stored as its JSON
// although prev, the stored version, has a view per location: prev is a template of the
// source's bytes (sourceJSON, hole) whose every view shows it at its own resourceVersion and
// generation (no visible history, no rendering, no status per location), and the version has
// several locations (a template too). Every view of either is then its bytes with the
// assignment value replaced, so comparing the bytes (changedOutsideHoles) tells whether the
// views changed, without decoding both versions and comparing their trees (setVisibility):
// building and settling such versions, mostly that decoding, was 16% of mapper-apiserver's CPU
// while it followed writes to 10 resources (bench scenario 2).
func templateSuccessor(prev *Object, locs []string) bool {
	return len(locs) > 1 && prev.sourceJSON && prev.hole.end > 0 &&
		prev.visible == nil && prev.rendered == nil && prev.failed == nil && prev.lastGood == nil &&
		!prev.statusDiffers
}

// changedOutsideHoles reports whether the JSON of o differs from prev's, both the source's
// bytes of a version shown as it is or as a template (templateSuccessor), anywhere a view would
// show it as a change: anywhere but in the parts every view of a version writes its own way
// (the assignment value, the location's ["<location>"]; the value of metadata.resourceVersion)
// and, when o moves metadata.generation, the value of metadata.generation and of .status. A
// view that changed in .status alone keeps showing its old generation (setVisibility), so
// such a change is not one every view shows as it is. It reports false when it cannot tell (a
// resourceVersion not found exactly once, .status or metadata.generation in one version only,
// a part found twice, prev not the source's bytes): the caller then decodes.
func changedOutsideHoles(prev, o *Object) bool {
	if !prev.sourceJSON {
		return false
	}
	versionParts := prev.generation != o.generation
	a, aParts, ok := piecesOutsideHoles(prev, versionParts)
	if !ok {
		return false
	}
	b, bParts, ok := piecesOutsideHoles(o, versionParts)
	if !ok || aParts != bParts || len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return true
		}
	}
	return false
}

// assignmentPath is the path of the assignment value (kcp.io/assigned-locations) in an object.
var assignmentPath = []string{"metadata", "annotations", contract.AssignedLocationsAnnotation}

// versionPaths are the parts of an object that piecesOutsideHoles leaves out, besides the
// assignment and resourceVersion values, when the generation moves.
var versionPaths = [][]string{{"metadata", "generation"}, {"status"}}

// piecesOutsideHoles returns the JSON of o without its assignment value and its
// metadata.resourceVersion value, and with versionParts also without the values of
// versionPaths: the pieces around them, in order. found has bit 0 set when o has an assignment
// value, and bit i+1 when it has the value of versionPaths[i]. ok is false when a part cannot
// be found exactly once.
func piecesOutsideHoles(o *Object, versionParts bool) (pieces [][]byte, found uint8, ok bool) {
	rv, ok := findValue(o.json.Bytes(), "metadata", "resourceVersion")
	if !ok {
		return nil, 0, false
	}
	cuts := make([]assignmentHole, 0, 2+len(versionPaths))
	cuts = append(cuts, rv)
	add := func(path []string, bit uint8) bool {
		start, end, has, err := rawjson.ValueRange(o.json.Bytes(), path...)
		if has {
			cuts = append(cuts, assignmentHole{start: start, end: end})
			found |= bit
		}
		return err == nil
	}
	if o.hole.end > 0 {
		// A template: the hole is its assignment value, and the finalizers member when views
		// leave out other locations' finalizers.
		cuts, found = append(cuts, o.hole), 1
		if o.more != nil && o.more.finalizers.end > 0 {
			cuts, found = append(cuts, o.more.finalizers), found|1<<7
		}
	} else if !add(assignmentPath, 1) {
		return nil, 0, false
	}
	for i, path := range versionPaths {
		if versionParts && !add(path, 2<<i) {
			return nil, 0, false
		}
	}
	slices.SortFunc(cuts, func(a, b assignmentHole) int { return a.start - b.start })
	raw, next := o.json.Bytes(), 0
	for _, c := range cuts {
		if c.start < next {
			return nil, 0, false
		}
		pieces = append(pieces, raw[next:c.start])
		next = c.end
	}
	return append(pieces, raw[next:]), found, true
}

// jsonSuffices reports whether id, a version that arrived as bytes and is assigned to locs, can
// be stored as its JSON: every view of it is the object itself (one location, whose assignment
// value already is ["<location>"]) or the object with its assignment value replaced (several
// locations: templatable), and no comparison with the previous version needs its content.
// Concretely:
//   - no annotation hidden from some view (status records, spec-diff.kcp.io/ patches,
//     kcp.io/status-location, last-applied-configuration) and no status reflected across
//     several locations, so .status is the object's own in every view;
//   - no Customization selects it for any of its locations (customization.Rules.Differs
//     against no rules: selectors only, no CEL);
//   - on a plain source, no kcp.io/cluster of its own (which the cache would have to replace);
//   - prev is nil, or prev and the version are both shown as they are (one location or none),
//     so that which locations see the change needs no rendering (setVisibility; only a
//     version that moves metadata.generation is compared with prev, to tell a change of
//     .status alone: as bytes by buildFromJSON, else decoding both); or both are templates
//     and their bytes tell that every view changed (templateSuccessor, checked by
//     buildFromJSON).
func (s *ResourceStore) jsonSuffices(id identity, prev *Object, locs []string) bool {
	if id.raw == nil || (id.edit != nil && id.edit.had) {
		return false
	}
	if prev != nil && (prev.variants != nil || len(locs) > 1) && !templateSuccessor(prev, locs) {
		return false
	}
	for k, v := range id.annotations {
		if hiddenAnnotation(k, v, "") {
			return false
		}
	}
	if !id.marks.sameInEveryView(locs) {
		return false // a view shows a deletion the bytes do not (deletion.go)
	}
	switch {
	case len(locs) == 1 && id.annotations[contract.AssignedLocationsAnnotation] != assignedToOnly(locs[0]) && !relatedCopyAsItIs(id, locs[0]):
		return false
	case len(locs) > 1 && contract.ReflectsStatus(id.annotations):
		return false
	}
	if rules := s.rules.load(); rules != nil {
		objLabels := labels.Set(id.raw.Labels)
		for _, loc := range locs {
			if rules.Differs(nil, s.gvr, id.cluster, id.namespace, objLabels, loc) {
				return false
			}
		}
	}
	return true
}
