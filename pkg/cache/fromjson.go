package cache

import (
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// An object version that arrives as bytes (a source.Object, from the source's object client) is
// stored without ever being decoded when its views are the object itself, or the object with
// its assignment value replaced (a template, template.go): the cache then keeps the source's
// JSON (with kcp.io/cluster inserted on a plain source, by the object client as it reads the
// bytes, else here) and the metadata the source's decoder read. This is the common case, and the whole first list of a resource takes this path, so
// start-up builds no tree of maps per object (issue 12 item 2: "decode metadata only, from the
// bytes the source sent"). Every other version is decoded (identity.tree) and takes the
// rendering path (newObject, settleRendering, compact), exactly as a decoded object does.

// buildFromJSON returns the Object of id, a version that arrived as bytes, assigned to locs at
// resourceVersion rv, made from its JSON without decoding it; nil when the version needs
// decoding (jsonSuffices). prev is the stored version before it (nil for a new object).
func (s *ResourceStore) buildFromJSON(id identity, prev *Object, locs []string, rv uint64) *Object {
	if !s.jsonSuffices(id, prev, locs) {
		return nil
	}
	raw := id.raw.JSON()
	if id.edit != nil && !id.editedJSON {
		var err error
		if raw, err = id.raw.WithAnnotation(contract.ClusterAnnotation, id.cluster); err != nil {
			return nil
		}
	}
	o := &Object{
		key: id.key, cluster: id.cluster, namespace: s.intern.get(id.namespace), name: id.name, uid: id.uid,
		typeMeta:  id.raw.TypeMeta,
		locations: locs, assigned: locs,
		rv: rv, rvString: id.rvString, sourceRV: rv, generation: id.raw.Generation,
		labels: newObjectLabels(id.raw.Labels, s.intern.get),
		edit:   id.edit,
	}
	if o.typeMeta == s.typeMeta {
		o.typeMeta = s.typeMeta
	}
	o.jsonOnce.Do(func() { o.json = raw })
	if len(locs) > 1 {
		h, ok := findAssignmentHole(id.annotations[contract.AssignedLocationsAnnotation], raw)
		if !ok {
			return nil
		}
		o.variants, o.hole = &locationVariants{}, h
	}
	return o
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
//     .status alone, decoding both).
func (s *ResourceStore) jsonSuffices(id identity, prev *Object, locs []string) bool {
	if id.raw == nil || (id.edit != nil && id.edit.had) {
		return false
	}
	if prev != nil && (prev.variants != nil || len(locs) > 1) {
		return false
	}
	for k, v := range id.annotations {
		if hiddenAnnotation(k, v, "") {
			return false
		}
	}
	switch {
	case len(locs) == 1 && id.annotations[contract.AssignedLocationsAnnotation] != assignedToOnly(locs[0]):
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
