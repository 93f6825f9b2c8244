package cache

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cluster-mapper/cluster-mapper/pkg/rawjson"
)

// A location sees an object through its view (Object.ForLocation), which hides what belongs to
// other locations (docs/design.md, "The location view"). A source event that
// changes only what a location cannot see (another location's status record, the assignment of
// other locations, kubectl's last-applied-configuration, ...) is not a change of that location's
// view: the location gets no watch event for it, live or replayed from the history, and its
// view keeps showing the object at the resourceVersion of the last change it could see (its
// "visible resourceVersion"). docs/views.md, "Status writes of other locations", gives the
// reasons (L locations writing status on one object made L² events and a
// timing side channel).
//
// metadata.generation is treated like metadata.resourceVersion: kube-apiserver bumps it on
// changes a location may not see (a Deployment's generation moves on every change of its
// annotations, k8s.io/kubernetes pkg/registry/apps/deployment/strategy.go, so on every status
// record written), so the comparisons leave it out, and a view shows the generation of its
// last visible change (VisibleGeneration). Otherwise every status write of a location would
// be an event in every view.

// visibleVersions records, for an object version whose views did not all change at its own
// resourceVersion, the visible resourceVersion of each location: byLocation[location] when
// present, else base. An Object whose visible is nil was seen changed by every location of it
// at its own resourceVersion.
//
// byLocation holds only the locations whose view changed since the last version every location
// saw changed (base is that version's resourceVersion), so it stays as small as the set of
// locations that wrote status since, not as large as the object's locations.
//
// baseGeneration and generations are the metadata.generation the object had at those
// resourceVersions, what the views of those locations show (VisibleGeneration):
// generations[location] for a location of byLocation whose visible resourceVersion is older
// than the object's, else baseGeneration. setVisibility and the re-rendering after a
// Customization change (rerenderedVisibility, rules.go) fill them; a visibleVersions without
// generations (nil) records none, and VisibleGeneration then reports the object's own.
type visibleVersions struct {
	base       uint64
	byLocation map[string]uint64

	baseGeneration int64
	generations    map[string]int64
}

// VisibleResourceVersion returns the resourceVersion at which location's view of this object
// version last changed: the source resourceVersion of the newest version up to this one whose
// rendering for location (Object.ForLocation, metadata.resourceVersion aside) differs from its
// predecessor's. It is the metadata.resourceVersion location's view shows. For a location the
// object is not assigned to it is the object's own resourceVersion.
func (o *Object) VisibleResourceVersion(location string) uint64 {
	if o.visible == nil {
		return o.rv
	}
	if rv, ok := o.visible.byLocation[location]; ok {
		return rv
	}
	if !o.HasLocation(location) {
		return o.rv
	}
	return o.visible.base
}

// VisibleGeneration returns the metadata.generation location's view of this object version
// shows when it is not the object's own (older is then true; 0 means no metadata.generation):
// the generation the object had at the last version whose change location's view showed
// outside .status. A view shows the generation of its last visible change as it shows its
// resourceVersion, so that a change it cannot see that only bumps the generation (a status
// record of another location on a Deployment) leaves it unchanged, byte for byte; and, as
// kube-apiserver keeps an object's generation across status writes, a change it sees in
// .status alone (its own status record) does not move it either. older is false when the
// view shows this version's own generation, and for a version whose visibleVersions records
// no generations.
func (o *Object) VisibleGeneration(location string) (generation int64, older bool) {
	if o.visible == nil || o.visible.generations == nil {
		return 0, false
	}
	if g, ok := o.visible.generations[location]; ok {
		return g, g != o.generation
	}
	if o.VisibleResourceVersion(location) >= o.rv {
		return 0, false
	}
	return o.visible.baseGeneration, o.visible.baseGeneration != o.generation
}

// ViewGeneration returns the metadata.generation location's view of this object version
// shows: the object's own, or an older one (VisibleGeneration). A target whose controller
// observed this generation of the view observed everything the view shows of this version
// outside .status (the Summarize policy compares them: pkg/statusrecords).
func (o *Object) ViewGeneration(location string) int64 {
	if g, older := o.VisibleGeneration(location); older {
		return g
	}
	return o.generation
}

// setGeneration sets u's metadata.generation to generation (0: none), changing u only when it
// differs.
func setGeneration(u *unstructured.Unstructured, generation int64) {
	if u.GetGeneration() == generation {
		return
	}
	if generation == 0 {
		unstructured.RemoveNestedField(u.Object, "metadata", "generation")
		return
	}
	u.SetGeneration(generation)
}

// SourceResourceVersion returns the source's resourceVersion of this object version. It differs
// from ResourceVersion only for a location's view (ForLocation) whose visible resourceVersion is
// older than the source's.
func (o *Object) SourceResourceVersion() uint64 { return o.sourceRV }

// viewChangedFor reports whether location, which held the object before and after the event
// that stored o, saw that event change its view.
func (o *Object) viewChangedFor(location string) bool {
	return o.VisibleResourceVersion(location) == o.rv
}

// setVisibility computes obj.visible from its predecessor prev (nil for a new object): which of
// obj's locations see the event change their view, and which generation each view shows. A
// location new to the object sees it (ADDED). A location that held prev too sees a change
// exactly when LocationView renders prev and obj differently, metadata.resourceVersion and
// metadata.generation aside; viewChanges decides that without rendering the object once per
// location. A location that sees no change keeps its visible resourceVersion and the
// generation its view showed. A location that sees a change of .status only keeps the
// generation its view showed as well, as kube-apiserver keeps an object's generation across
// status writes: its view's generation moves only with what it shows outside .status (the
// Summarize policy relies on it, docs/status.md). Called once per object version, before obj
// is published (obj is not shared yet).
func setVisibility(prev, obj *Object) {
	if prev == nil || len(obj.locations) == 0 || obj.everyViewChanged {
		// New, in no view, or changed in every view (buildFromJSON compared the bytes).
		return
	}
	if prev.variants == nil && obj.variants == nil && prev.generation == obj.generation {
		// Shown as they are to their one location, at the same generation: every view changed,
		// and shows obj's generation.
		return
	}
	prevU := prev.content()
	// Whether a view changed in .status only matters when the generation it showed is not
	// obj's: otherwise it shows obj's generation either way.
	statusOnlyMatters := func(loc string) bool { return prev.ViewGeneration(loc) != obj.generation }
	unchanged, statusOnly := viewChanges(prev, obj, prevU, statusOnlyMatters)
	for loc := range obj.lastGood {
		// Its rendering failed or is pending: it keeps showing prev's rendering (render.go).
		if unchanged == nil {
			unchanged = map[string]bool{}
		}
		unchanged[loc] = true
		delete(statusOnly, loc)
	}
	if len(unchanged) == 0 && len(statusOnly) == 0 {
		return
	}
	vis := &visibleVersions{base: prev.rv, byLocation: map[string]uint64{},
		baseGeneration: prev.generation, generations: map[string]int64{}}
	if prev.visible != nil {
		vis.base, vis.baseGeneration = prev.visible.base, prev.visible.baseGeneration
	}
	for _, loc := range obj.locations {
		switch {
		case unchanged[loc]:
			if prev.visible != nil {
				if rv, ok := prev.visible.byLocation[loc]; ok {
					vis.byLocation[loc] = rv
					vis.generations[loc] = prev.ViewGeneration(loc)
				}
			}
		case statusOnly[loc]:
			vis.byLocation[loc] = obj.rv
			vis.generations[loc] = prev.ViewGeneration(loc)
		default:
			vis.byLocation[loc] = obj.rv
		}
	}
	obj.visible = vis
	if obj.variants == nil {
		// A view whose resourceVersion or generation is not the object's own is a copy.
		obj.variants = &locationVariants{}
	}
}

// One resourceVersion, one content, across restarts and replicas. A view's generation is not
// a function of the source object version it shows: after a location's own status write, its
// view shows the write's resourceVersion with the generation it showed before (the source's
// moved with the status record), and which generation that is depends on the versions the
// server saw. A server that starts afresh knows none of them and shows the source's. So the
// first list of a store could show an object at the very resourceVersion a previous run of the
// server showed with another generation (a client that skips updates whose resourceVersion
// did not change, as the mapper does, then never sees the change). settleFirstListed avoids it:
// an object whose view may show another generation than the source's, one whose generation has
// moved at all (2 or more), is shown at the list's resourceVersion, which the cache makes sure
// no previous run handed out (Cache.fence); every other object shows its own, with the content
// every run shows there. docs/views.md, "Restarts and replicas", gives the limits.

// settleFirstListed finishes o, an object version of the first list of the store, listed at
// listRV, before it is published, as settle does for later versions: when o's generation is 2
// or more and listRV is above o's resourceVersion, every location of o sees o at listRV, with
// o's own generation (freshVisibility); then its stored form, its views made now so that LIST
// and watch never render: from its bytes when it came as bytes (a template with a
// resourceVersion hole, or a copy), else rendered and encoded (Object.compact). Called with
// writeMu held.
func (s *ResourceStore) settleFirstListed(o *Object, listRV uint64) {
	if !freshVisibility(o, listRV) {
		s.settle(nil, o)
		return
	}
	if o.u == nil {
		// Built from the source's bytes (buildFromJSON): without decoding it, a template
		// fills a resourceVersion hole too (template.go), and an object shown as it is gets
		// its view as a copy of its bytes with the resourceVersion replaced.
		raw, err := o.MarshalJSON()
		if err == nil && o.hole.end > 0 {
			if more, ok := o.findMoreHoles(raw); ok {
				o.more = more
				return
			}
		}
		if err == nil && o.hole.end == 0 && o.viewFromOwnJSON(o.json, listRV) {
			return
		}
		o.u, o.hole, o.more = o.content(), assignmentHole{}, nil
	}
	o.compact(nil)
}

// viewFromOwnJSON makes every view of o, built from the source's bytes raw and shown as it is
// (buildFromJSON without a template), from raw with the value of metadata.resourceVersion
// replaced by rv: one copy of the bytes, shared by o's locations, no decoding, rendering or
// encoding (BenchmarkFirstListMovedGenerations). It reports false, doing nothing, when the
// resourceVersion is not a string value at metadata.resourceVersion of raw (found structurally).
func (o *Object) viewFromOwnJSON(raw rawjson.Compact, rv uint64) bool {
	at, ok := findValue(raw.Bytes(), "metadata", "resourceVersion")
	if !ok {
		return false
	}
	rvString := strconv.FormatUint(rv, 10)
	value, _ := json.Marshal(rvString)
	// A string value in place of a string value: the view is compact as raw is.
	view := rawjson.Splice(raw, -1, -1, at.start, at.end-at.start, value)
	v := o.viewFromJSON(view, rv, rvString, o.generation)
	o.variants.m = make(map[string]*Object, len(o.locations))
	for _, loc := range o.locations {
		o.variants.m[loc] = v
	}
	return true
}

// freshVisibility makes every location of o (a version without predecessor) see it at listRV
// when o's generation is 2 or more and listRV is above o's own resourceVersion, and reports
// whether it did. See settleFirstListed.
func freshVisibility(o *Object, listRV uint64) bool {
	if o.generation < 2 || len(o.locations) == 0 || listRV <= o.rv {
		return false
	}
	o.visible = &visibleVersions{base: listRV, baseGeneration: o.generation}
	if o.variants == nil {
		o.variants = &locationVariants{}
	}
	return true
}

// viewChanges classifies the locations of both prev and obj by how the view (LocationView) of
// each changed from prev to obj, metadata.resourceVersion and metadata.generation aside:
// unchanged, or changed in .status only (statusOnly; decided only for the locations for which
// statusOnlyMatters reports true, the others count as changed outside .status). Every other
// location saw a change outside .status, or is new to the object. prevU is prev's content
// (Object.content).
//
// Every view is "the common view" (LocationView for the location "", which is no location:
// it shows nothing that belongs to one) with what belongs to the location itself added: its
// status record, shown as .status, a kcp.io/status-location naming it, its spec-diff.kcp.io/
// patch (annotationOwner), its finalizer and the deletion it sees (deletionOwners), and the
// Customizations that select it (which render that view,
// the same rules for prev and obj, from nothing else). So only locations owning an annotation
// or rendered by a Customization need rendering:
//   - when the common view did not change, a location sees a change only if an annotation it
//     owns changed (a status write of another location changes nothing else);
//   - when it did change, a location that owns no annotation in either version sees exactly
//     the common view, so it sees the change; the owners are rendered and compared (also
//     everyone when an annotation is owned by "", which the common view shows and no location).
func viewChanges(prev, obj *Object, prevU *unstructured.Unstructured, statusOnlyMatters func(loc string) bool) (unchanged, statusOnly map[string]bool) {
	objU := obj.content()
	prevCommon, objCommon := baseView(prevU, prev.assigned, ""), baseView(objU, obj.assigned, "")
	commonSame := sameView(prevCommon, objCommon)
	if !commonSame && !sameContent(prevCommon, objCommon, true, true) {
		// Something every view shows as the common view does (the spec, labels...) changed.
		return nil, nil
	}
	var changedOwners, owners map[string]bool
	if commonSame {
		changedOwners = changedAnnotationOwners(prevU, objU)
		// A location whose finalizer either version carries shows the common view with its
		// finalizer, deletion and assignment (deletion.go).
		for _, loc := range deletionOwners(prev, obj, true) {
			changedOwners[loc] = true
		}
	} else {
		owners = annotationOwners(prevU)
		for loc := range annotationOwners(objU) {
			owners[loc] = true
		}
		for _, loc := range deletionOwners(prev, obj, false) {
			owners[loc] = true
		}
		// A location a Customization renders sees its own rendering, not the common view.
		for _, o := range []*Object{prev, obj} {
			for loc := range o.rendered {
				owners[loc] = true
			}
			for loc := range o.failed {
				owners[loc] = true
			}
		}
	}
	commonStatusOnly := -1 // unknown; 0 no, 1 yes
	unchanged, statusOnly = map[string]bool{}, map[string]bool{}
	for _, loc := range obj.locations {
		switch {
		case !prev.HasLocation(loc):
			// New to the object: ADDED.
		case commonSame && !changedOwners[loc]:
			unchanged[loc] = true
		case !commonSame && !owners[loc] && !owners[""]:
			// Shows the common view, which changed.
			if statusOnlyMatters(loc) {
				if commonStatusOnly < 0 {
					commonStatusOnly = 0
					if sameContent(prevCommon, objCommon, true, false) {
						commonStatusOnly = 1
					}
				}
				statusOnly[loc] = commonStatusOnly == 1
			}
		default:
			was, is := prev.renderingOf(prevU, loc), obj.view(loc)
			switch {
			case sameView(was, is):
				unchanged[loc] = true
			case statusOnlyMatters(loc) && sameContent(was, is, true, false):
				statusOnly[loc] = true
			}
		}
	}
	return unchanged, statusOnly
}

// annotationOwners returns the locations owning (annotationOwner) an annotation of u.
func annotationOwners(u *unstructured.Unstructured) map[string]bool {
	owners := map[string]bool{}
	for k, v := range u.GetAnnotations() {
		if loc, ok := annotationOwner(k, v); ok {
			owners[loc] = true
		}
	}
	return owners
}

// changedAnnotationOwners returns the locations owning (annotationOwner) an annotation whose
// value differs between a and b, or that only one of them has.
func changedAnnotationOwners(a, b *unstructured.Unstructured) map[string]bool {
	owners := map[string]bool{}
	aa, ba := a.GetAnnotations(), b.GetAnnotations()
	note := func(k, v string) {
		if loc, ok := annotationOwner(k, v); ok {
			owners[loc] = true
		}
	}
	for k, v := range aa {
		if w, ok := ba[k]; !ok || w != v {
			note(k, v)
			if ok {
				note(k, w)
			}
		}
	}
	for k, w := range ba {
		if _, ok := aa[k]; !ok {
			note(k, w)
		}
	}
	return owners
}

// sameView reports whether two renderings of an object are equal but for
// metadata.resourceVersion and metadata.generation, which a view shows as of its last visible
// change (VisibleResourceVersion, VisibleGeneration). Both come from JSON decoding (the same
// value types), so reflect.DeepEqual compares them as kube-apiserver would compare their JSON.
func sameView(a, b *unstructured.Unstructured) bool { return sameContent(a, b, false, false) }

// sameContent is sameView, leaving out .status as well when skipStatus is set, and
// metadata.annotations when skipAnnotations is set (the parts a location's own view replaces
// or adds to).
func sameContent(a, b *unstructured.Unstructured, skipStatus, skipAnnotations bool) bool {
	var skip []string
	if skipStatus {
		skip = []string{"status"}
	}
	if !sameMapExcept(a.Object, b.Object, "metadata", skip...) {
		return false
	}
	am, _ := a.Object["metadata"].(map[string]interface{})
	bm, _ := b.Object["metadata"].(map[string]interface{})
	skip = []string{"resourceVersion", "generation"}
	if skipAnnotations {
		skip = append(skip, "annotations")
	}
	return sameMapExcept(am, bm, "", skip...)
}

// sameMapExcept compares a and b with reflect.DeepEqual, leaving out the keys skip and
// (when not "") the key later, which the caller compares itself.
func sameMapExcept(a, b map[string]interface{}, later string, skip ...string) bool {
	ignored := func(k string) bool { return k == later || slices.Contains(skip, k) }
	n := 0
	for k, av := range a {
		if ignored(k) {
			continue
		}
		n++
		bv, ok := b[k]
		if !ok || !reflect.DeepEqual(av, bv) {
			return false
		}
	}
	for k := range b {
		if !ignored(k) {
			n--
		}
	}
	return n == 0
}
