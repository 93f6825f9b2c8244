package cache

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/source"
)

var (
	_ toolscache.ReflectorStore         = &ResourceStore{}
	_ toolscache.ResourceVersionUpdater = &ResourceStore{}
)

// maxLoggedValue is how many bytes of a value taken from a source object (a key, an annotation,
// an error quoting one) a log line repeats (see contract.Truncate).
const maxLoggedValue = 512

// identity is the part of an object that is computed before deciding whether it is new.
type identity struct {
	// u is the decoded object as views show it (on a plain source, with kcp.io/cluster set);
	// for a version that arrived as bytes (raw) it is nil until tree decodes it.
	u *unstructured.Unstructured
	// raw, when not nil, is the version as the source's object client read it: its JSON and
	// metadata (source.Object).
	raw       *source.Object
	key       contract.Key
	cluster   string
	namespace string
	name      string
	uid       types.UID
	rvString  string
	// annotations is the object's metadata.annotations (may be nil; shared: read-only).
	annotations map[string]string
	// marks are the object's finalizers and deletion as the deletion protocol reads them
	// (deletion.go; nil: none).
	marks *deletionMarks
	// assignmentNotString: the decoded object's kcp.io/assigned-locations is not a string
	// (impossible on a Kubernetes API server, which validates annotations; counted as malformed).
	assignmentNotString bool
	// invalid, when set, says why the object has no valid logical cluster (a kcp source
	// only); such an object is not stored.
	invalid error
	// undecodable, when set, says why the version's content does not decode (a
	// source.Object's DecodeError, or one without a kind); such a version is skipped
	// (skipUndecodableLocked).
	undecodable error
	// edit, when not nil, says how the object views show differs from the object the source
	// sent: kcp.io/cluster set (a plain source).
	edit *clusterEdit
	// editedJSON says raw's JSON already has the edit: the source's object client added
	// kcp.io/cluster (source.Object.Added).
	editedJSON bool
}

// toVersion accepts what a reflector hands to the store: an *unstructured.Unstructured (from a
// dynamic client; its managedFields are dropped) or a *source.Object (from the source's object
// client), also inside a cache.DeletedFinalStateUnknown. It returns the object's metadata and
// the object; anything else is an error.
func toVersion(obj interface{}) (metav1.Object, error) {
	switch t := obj.(type) {
	case *unstructured.Unstructured:
		if t == nil {
			return nil, fmt.Errorf("nil object")
		}
		dropManagedFields(t)
		return t, nil
	case *source.Object:
		if t == nil {
			return nil, fmt.Errorf("nil object")
		}
		return t, nil
	case toolscache.DeletedFinalStateUnknown:
		return toVersion(t.Obj)
	case *toolscache.DeletedFinalStateUnknown:
		if t == nil {
			return nil, fmt.Errorf("nil object")
		}
		return toVersion(t.Obj)
	default:
		return nil, fmt.Errorf("expected *unstructured.Unstructured or *source.Object, got %T", obj)
	}
}

// identify computes the logical cluster and the contract.Key of v, an *unstructured.Unstructured
// or a *source.Object (toVersion), from its metadata (docs/design.md, "Names"):
//   - a plain source (StoreOptions.DefaultCluster): every object belongs to the configured
//     cluster; a kcp.io/cluster annotation written by a user is ignored, and the object views
//     show has kcp.io/cluster set to the configured cluster (edit; for a decoded object, a
//     shallow copy when it lacks it, so v itself is never changed), so that views always show
//     it and it is encoded once per object version;
//   - a kcp source (StoreOptions.ClusterFromAnnotation): the cluster is v's kcp.io/cluster;
//     when it is missing or not a valid logical cluster name, invalid says why.
func (s *ResourceStore) identify(v metav1.Object) identity {
	id := identity{name: v.GetName(), uid: v.GetUID(), rvString: v.GetResourceVersion()}
	switch t := v.(type) {
	case *unstructured.Unstructured:
		id.u = t
		id.annotations, id.assignmentNotString = stringAnnotations(t)
		id.marks = marksOfObject(t)
	case *source.Object:
		id.raw, id.annotations = t, t.Annotations
		id.marks = marksOf(t.Finalizers, t.DeletionTimestamp)
		switch {
		case t.DecodeError() != nil:
			id.undecodable = t.DecodeError()
		case t.Kind == "":
			// kube-apiserver's decoder, and the cache's unstructured decoding, need one.
			id.undecodable = fmt.Errorf("the object has no kind")
		}
	}
	if s.namespaced {
		id.namespace = v.GetNamespace()
	}
	if s.opts.ClusterFromAnnotation {
		c := id.annotations[contract.ClusterAnnotation]
		switch {
		case c == "":
			id.invalid = fmt.Errorf("the object has no %s annotation (a kcp source sets it on every object)", contract.ClusterAnnotation)
		default:
			id.invalid = contract.ValidateClusterName(c)
		}
		id.cluster = c
	} else {
		id.cluster = s.opts.DefaultCluster
		if key, hadAnnotations, added := addedByClient(id.raw); added && key == contract.ClusterAnnotation && id.annotations[key] == id.cluster {
			// The object client wrote the configured cluster into the bytes it read.
			id.edit, id.editedJSON = editFor(hadAnnotations, false, ""), true
		} else if c, had := id.annotations[contract.ClusterAnnotation]; c != id.cluster {
			id.edit = editFor(id.annotations != nil, had, c)
			if id.u != nil {
				id.u, _ = withAnnotation(id.u, contract.ClusterAnnotation, id.cluster)
			}
		}
	}
	id.key = contract.NewKey(id.cluster, id.namespace, id.name)
	return id
}

// ownStrings gives the version the strings it keeps (name, uid, resourceVersion) as its own,
// made now, instead of those the decoder made: the decoder's are allocated next to the many
// strings of the same size that die with the source object (label and annotation keys and
// values, client-go's keys), and the few kept ones would keep the heap's spans that hold them in
// use after a first sync (BenchmarkStreamedSyncHeap). The name is the end of the key, which was
// made with it. build parses the locations from a clone of the assignment for the same reason.
// Location names are not interned: they come from objects, and a table that only grows would
// keep every name ever assigned (TestLocationChurnHeap).
func (id *identity) ownStrings() {
	id.name = string(id.key)[len(id.key)-len(id.name):]
	id.uid = types.UID(strings.Clone(string(id.uid)))
	id.rvString = strings.Clone(id.rvString)
}

// addedByClient returns the annotation the source's object client added to o (source.Object.Added);
// ok is false for nil.
func addedByClient(o *source.Object) (key string, hadAnnotations, ok bool) {
	if o == nil {
		return "", false, false
	}
	return o.Added()
}

// stringAnnotations returns the string-valued annotations of u, and whether its
// kcp.io/assigned-locations annotation has a value that is not a string. (u.GetAnnotations
// returns nothing at all when one value is not a string.)
func stringAnnotations(u *unstructured.Unstructured) (map[string]string, bool) {
	a, _, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "annotations")
	m, _ := a.(map[string]interface{})
	if m == nil {
		return nil, false
	}
	out := make(map[string]string, len(m))
	notString := false
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		} else if k == contract.AssignedLocationsAnnotation {
			notString = true
		}
	}
	return out, notString
}

// tree returns the decoded object as views show it: id.u, or for a version that arrived as
// bytes its JSON decoded, with the cluster edit applied. An error is the decoder's.
func (id *identity) tree() (*unstructured.Unstructured, error) {
	if id.u != nil {
		return id.u, nil
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(id.raw.JSON().Bytes()); err != nil {
		return nil, err
	}
	if id.edit != nil {
		u, _ = withAnnotation(u, contract.ClusterAnnotation, id.cluster)
	}
	id.u = u
	return u, nil
}

// withAnnotation returns a shallow copy of u whose annotation key is value, and the copy's
// annotations. Only the maps on the path to the annotation are copied (the top level,
// metadata and annotations); everything else is shared with u, which is not changed.
func withAnnotation(u *unstructured.Unstructured, key, value string) (*unstructured.Unstructured, map[string]interface{}) {
	obj := make(map[string]interface{}, len(u.Object))
	for k, v := range u.Object {
		obj[k] = v
	}
	oldMeta, _ := u.Object["metadata"].(map[string]interface{})
	meta := make(map[string]interface{}, len(oldMeta)+1)
	for k, v := range oldMeta {
		meta[k] = v
	}
	oldAnn, _ := oldMeta["annotations"].(map[string]interface{})
	ann := make(map[string]interface{}, len(oldAnn)+1)
	for k, v := range oldAnn {
		ann[k] = v
	}
	ann[key] = value
	meta["annotations"] = ann
	obj["metadata"] = meta
	return &unstructured.Unstructured{Object: obj}, ann
}

// rejectLocked counts and logs an object of a kcp source without a valid logical cluster,
// once per object version (s.rejected remembers the last rejected version per UID). Called
// with s.writeMu held.
func (s *ResourceStore) rejectLocked(id identity) {
	uid, rv := id.uid, id.rvString
	if uid != "" {
		if s.rejected[uid] == rv {
			return
		}
		s.rejected[uid] = rv
	}
	s.metrics.invalidCluster.Inc()
	klog.InfoS("Ignoring a source object without a valid logical cluster; it is not served",
		"resource", s.gvr.GroupResource().String(), "namespace", id.namespace, "name", id.name,
		"resourceVersion", rv, "err", contract.Truncate(id.invalid.Error(), 512))
}

// skipUndecodableLocked counts and logs a version whose content does not decode
// (identity.undecodable), once per object version as rejectLocked does (s.rejected). The
// version is not stored: the store keeps serving the version it had, if any, so that one
// object the source serves in a form kube-apiserver's decoder refuses neither fails the
// resource's list or watch (which would never sync) nor removes the object from any view
// (docs/views.md, "Objects that do not decode"). Called with s.writeMu held.
func (s *ResourceStore) skipUndecodableLocked(id identity) {
	uid, rv := id.uid, id.rvString
	if uid != "" {
		if s.rejected[uid] == rv {
			return
		}
		s.rejected[uid] = rv
	}
	s.metrics.undecodable.Inc()
	klog.InfoS("Skipping a source object version whose content does not decode; views keep the version they had",
		"resource", s.gvr.GroupResource().String(), "namespace", contract.Truncate(id.namespace, maxLoggedValue),
		"name", contract.Truncate(id.name, maxLoggedValue), "resourceVersion", contract.Truncate(rv, maxLoggedValue),
		"err", contract.Truncate(id.undecodable.Error(), maxLoggedValue))
}

// movedLocked returns the stored version of the object u under another key than id.key: the
// same object (UID) whose logical cluster changed, or which lost its valid cluster. Only a
// kcp source can see that. Called with s.writeMu held.
func (s *ResourceStore) movedLocked(id identity) *Object {
	if !s.opts.ClusterFromAnnotation {
		return nil
	}
	uid := id.uid
	if uid == "" {
		return nil
	}
	k, ok := s.byUID[uid]
	if !ok || (k == id.key && id.invalid == nil) {
		return nil
	}
	return s.objects[k]
}

// deleteMovedLocked applies the deletion of moved, the old key of an object whose logical
// cluster changed, before the event at rv that stores it under its new key (or drops it). The
// deletion gets rv-1 when no event of the store used it yet, so that a client resuming at the
// DELETED event's RV still receives the ADDED of the new key; else it shares rv. Called with
// s.mu held for writing.
func (s *ResourceStore) deleteMovedLocked(moved *Object, rv uint64) {
	delRV := max(rv, s.rv)
	if rv > 0 && rv-1 > s.rv {
		delRV = rv - 1
	}
	klog.InfoS("A source object changed its logical cluster; serving it as a deletion of the old key",
		"resource", s.gvr.GroupResource().String(), "oldKey", string(moved.key), "resourceVersion", rv)
	s.applyLocked(&event{typ: watch.Deleted, rv: delRV, obj: moved.withResourceVersion(delRV), prev: moved}, true)
}

// build turns an identified object version into an Object, parsing its assignment once. A
// malformed annotation leaves the object unassigned, is counted and logged (once per object
// version, since build runs once per version).
//
// prev is the stored version before this one (nil for a new object): where location's
// rendering (its Customizations and its own patch) fails on the new version, or is deferred to
// the store's Renderer, the view keeps prev's rendering (settleRendering).
//
// The error says that the version's content does not decode (identity.tree): the caller skips
// the version (skipUndecodableLocked).
func (s *ResourceStore) build(id identity, prev *Object) (*Object, error) {
	var locs []string
	if str, present := id.annotations[contract.AssignedLocationsAnnotation]; present || id.assignmentNotString {
		var err error
		if id.assignmentNotString {
			err = fmt.Errorf("annotation value is not a string")
		} else {
			// On a clone of the value: the names are slices of it (ownStrings).
			locs, err = contract.ParseLocations(strings.Clone(str))
		}
		if err != nil {
			locs = nil
			s.metrics.malformed.Inc()
			// Every value that comes from the object is truncated: a hostile 200 KB annotation
			// must not become a 200 KB log line per object version.
			klog.InfoS("Ignoring malformed location assignment; the object is assigned to no location",
				"resource", s.gvr.GroupResource().String(), "object", contract.Truncate(string(id.key), maxLoggedValue),
				"resourceVersion", contract.Truncate(id.rvString, maxLoggedValue),
				"annotation", contract.AssignedLocationsAnnotation, "err", contract.Truncate(err.Error(), maxLoggedValue))
		}
	}
	locs = s.boundOnly(id, assignedOrRelated(locs, id.labelsOf()))
	id.ownStrings()
	rv, _ := strconv.ParseUint(id.rvString, 10, 64)
	if o := s.buildFromJSON(id, prev, locs, rv); o != nil {
		return o, nil
	}
	u, err := id.tree()
	if err != nil {
		// Impossible for bytes the source's object client accepted (source.DecodeObject reads
		// them as the decoder does); the version is skipped like one the client refused.
		return nil, err
	}
	o := newObject(id.key, id.cluster, id.namespace, id.name, locs, rv, u)
	o.edit = id.edit
	if raw, ok := sourceBytes(id); ok {
		// Its own JSON is the source's bytes, which u was decoded from, not u encoded again:
		// the next version can then be compared with it as bytes (templateSuccessor).
		o.jsonOnce.Do(func() { o.json = raw })
		o.sourceJSON = true
	}
	rules := s.rules.load()
	var deferred func(string) bool
	if s.opts.Renderer != nil {
		// A rendering that runs CEL waits for a Renderer worker (render.go).
		deferred = func(location string) bool { return runsCEL(rules, s.gvr, o, location) }
	}
	o.settleRendering(rules, s.gvr, s.opts.MaxRenderingBytes, prev, deferred, func(location string, err error) { s.renderFailed(o, location, err) })
	return o, nil
}

// renderFailed counts and logs that location's rendering of o failed with err.
func (s *ResourceStore) renderFailed(o *Object, location string, err error) {
	if (RenderFailure{Err: err}).isCustomization() {
		s.metrics.customizationFailures.Inc()
	} else {
		s.metrics.specDiffFailures.Inc()
	}
	klog.InfoS("An object cannot be rendered for a location; its view keeps the last version that rendered, or withholds the object",
		"resource", s.gvr.GroupResource().String(), "object", contract.Truncate(string(o.key), maxLoggedValue),
		"location", location, "resourceVersion", contract.Truncate(o.rvString, maxLoggedValue),
		"err", contract.Truncate(err.Error(), maxLoggedValue))
}

// settle finishes o, the new version of prev (nil for a new object), before it is published:
// which locations see it change (setVisibility), then its stored form (Object.compact: every
// view rendered and encoded, the decoded tree dropped). It runs under writeMu only, so readers
// are not blocked while o is rendered.
func (s *ResourceStore) settle(prev, o *Object) {
	setVisibility(prev, o)
	if o.u != nil {
		// An Object built from the source's bytes (buildFromJSON) is stored as it is.
		o.compact(prev)
	}
}

// sameVersion reports whether resourceVersion is that of the version already stored as prev
// (same non-empty resourceVersion), in which case the version carries no change.
func sameVersion(prev *Object, resourceVersion string) bool {
	return prev != nil && prev.rvString != "" && prev.rvString == resourceVersion
}

// Add implements cache.ReflectorStore: the source reported obj (a *source.Object, or an
// *unstructured.Unstructured, which the store keeps and never changes) as added.
func (s *ResourceStore) Add(obj interface{}) error { return s.upsert(obj) }

// Update implements cache.ReflectorStore: the source reported obj as modified.
func (s *ResourceStore) Update(obj interface{}) error { return s.upsert(obj) }

// upsert applies an added or modified object version. A version already stored (same
// resourceVersion) is ignored.
func (s *ResourceStore) upsert(obj interface{}) error {
	v, err := toVersion(obj)
	if err != nil {
		return err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	id := s.identify(v)
	if id.undecodable != nil {
		s.skipUndecodableLocked(id)
		return nil
	}
	moved := s.movedLocked(id)
	if id.invalid != nil {
		s.rejectLocked(id)
		if moved == nil {
			return nil
		}
		rv, _ := strconv.ParseUint(id.rvString, 10, 64)
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.closed {
			s.deleteMovedLocked(moved, rv)
			s.notifyLocked()
		}
		return nil
	}
	prev := s.objects[id.key]
	if sameVersion(prev, id.rvString) {
		return nil
	}
	o, err := s.build(id, prev)
	if err != nil {
		id.undecodable = err
		s.skipUndecodableLocked(id)
		return nil
	}
	s.settle(prev, o)
	typ := watch.Added
	if prev != nil {
		typ = watch.Modified
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	late := s.noteStreamLocked(o.rv)
	if moved != nil {
		s.deleteMovedLocked(moved, o.rv)
	}
	s.applyLocked(&event{typ: typ, rv: max(o.rv, s.rv), obj: o, prev: prev}, !late)
	if late {
		s.restartHistoryLocked()
	}
	s.notifyLocked()
	s.enqueuePending(o)
	return nil
}

// Delete implements cache.ReflectorStore: the source reported obj (its final state; a
// cache.DeletedFinalStateUnknown is accepted too) as deleted. Every location of the stored
// object gets a DELETED event with that final state.
func (s *ResourceStore) Delete(obj interface{}) error {
	v, err := toVersion(obj)
	if err != nil {
		return err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	id := s.identify(v)
	if uid := id.uid; uid != "" {
		delete(s.rejected, uid)
	}
	var prev *Object
	if id.invalid == nil {
		prev = s.objects[id.key]
	}
	if prev == nil {
		// The stored version under another key (a kcp object whose final state names another
		// cluster than the stored one).
		prev = s.movedLocked(id)
	}
	if prev == nil {
		return nil
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	rv, _ := strconv.ParseUint(id.rvString, 10, 64)
	late := s.noteStreamLocked(rv)
	rv = max(rv, s.rv)
	final, err := id.tree() // on a plain source, with kcp.io/cluster set
	if err != nil {
		// A final state that does not decode (source.Object.DecodeError): the stored
		// version's, which the deletion removes all the same.
		final = prev.content()
	}
	if final.GetResourceVersion() != strconv.FormatUint(rv, 10) {
		// A stale final state (DeletedFinalStateUnknown) or an unparsable RV: the DELETED
		// object must carry the event's RV.
		final = final.DeepCopy()
		final.SetResourceVersion(strconv.FormatUint(rv, 10))
	}
	if final.GetAnnotations()[contract.ClusterAnnotation] != prev.cluster {
		final, _ = withAnnotation(final, contract.ClusterAnnotation, prev.cluster)
	}
	o := newObject(prev.key, prev.cluster, prev.namespace, prev.name, prev.assigned, rv, final)
	o.locations, o.rendered, o.lastGood, o.failed = prev.locations, prev.rendered, prev.lastGood, prev.failed
	o.ensureVariants()
	s.applyLocked(&event{typ: watch.Deleted, rv: rv, obj: o, prev: prev}, !late)
	if late {
		s.restartHistoryLocked()
	}
	s.notifyLocked()
	return nil
}

// noteStreamLocked records that the source's stream reached rv (an event's resourceVersion) and
// reports whether the event is late: the store handed out a fresh resourceVersion above the
// stream for a re-rendering (SetRules) and this event of the source, older than it, arrives
// only now, so it cannot be placed in the history in order. Called with s.mu held for writing.
func (s *ResourceStore) noteStreamLocked(rv uint64) bool {
	late := s.rv > s.streamRV && rv <= s.rv
	s.streamRV = max(s.streamRV, rv)
	return late
}

// restartHistoryLocked ends every watch of the store and restarts the history at the store's
// resourceVersion, as a relist that lost events does (Replace): after a late event, a client
// resuming from before it gets 410 Gone and relists. Called with s.mu held for writing.
func (s *ResourceStore) restartHistoryLocked() {
	s.endWatchersLocked()
	s.history.reset(s.rv)
	s.snaps.reset()
	s.metrics.historyRestarts.Inc()
	klog.InfoS("A source event older than a re-rendering's resourceVersion arrived after it; the resource's watches were ended and resumes from before answer 410",
		"resource", s.gvr.GroupResource().String(), "resourceVersion", s.rv)
}

// Replace implements cache.ReflectorStore: list is the complete content of the source at
// resourceVersion (the initial list, and relists, e.g. after the source answered 410).
//
// The first Replace loads the content (nobody can watch before it) and starts the history at
// the list's RV. A later Replace (a relist) follows kube-apiserver's cacher: a relist does not
// reveal the resourceVersions of the deletions it implies, and inventing them would let two
// replicas tell a resuming client different histories. So when the relist shows an object
// gone (or an object at a resourceVersion the store already passed, a source whose RVs went
// backwards), the store takes the list as its content, restarts the history at the list's RV
// and ends every watch of the resource: a client resumes from an older RV, gets 410 Gone and
// relists by itself (client-go does), exactly as after the cacher reinitialized. A relist that
// shows only new object versions (each at its own RV above the store's, as after a source
// restart or a watch that broke without losing anything) is a set of real events: they are
// applied in RV order, recorded in the history and sent to the open watches, which stay open.
// RVs never go backwards.
func (s *ResourceStore) Replace(list []interface{}, resourceVersion string) error {
	var listRV uint64
	if resourceVersion != "" {
		var err error
		if listRV, err = strconv.ParseUint(resourceVersion, 10, 64); err != nil {
			return fmt.Errorf("invalid resourceVersion %q of the %s list: %v", contract.Truncate(resourceVersion, maxLoggedValue), s.gvr.GroupResource(), err)
		}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()

	seen := make(map[contract.Key]struct{}, len(list))
	var changed []*Object
	for _, item := range list {
		v, err := toVersion(item)
		if err != nil {
			klog.ErrorS(err, "Ignoring list item", "resource", s.gvr.GroupResource().String())
			continue
		}
		id := s.identify(v)
		if id.undecodable != nil {
			s.skipUndecodableLocked(id)
			if _, stored := s.objects[id.key]; stored {
				seen[id.key] = struct{}{} // kept as it is: the list holds the object
			}
			continue
		}
		if id.invalid != nil {
			s.rejectLocked(id)
			continue
		}
		if _, dup := seen[id.key]; dup {
			continue
		}
		seen[id.key] = struct{}{}
		if sameVersion(s.objects[id.key], id.rvString) {
			continue
		}
		prev := s.objects[id.key]
		o, err := s.build(id, prev)
		if err != nil {
			id.undecodable = err
			s.skipUndecodableLocked(id)
			continue // kept as it is, if stored (seen)
		}
		if s.synced {
			s.settle(prev, o)
		} else {
			s.settleFirstListed(o, listRV)
		}
		changed = append(changed, o)
	}
	var vanished []*Object
	for k, o := range s.objects {
		if _, ok := seen[k]; !ok {
			vanished = append(vanished, o)
		}
	}
	sort.SliceStable(changed, func(i, j int) bool {
		if changed[i].rv != changed[j].rv {
			return changed[i].rv < changed[j].rv
		}
		return changed[i].key < changed[j].key
	})

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	restart := !s.synced || len(vanished) > 0 || (len(changed) > 0 && changed[0].rv <= s.rv)
	if restart && s.synced {
		s.endWatchersLocked()
	}
	for _, o := range changed {
		prev := s.objects[o.key]
		typ := watch.Added
		if prev != nil {
			typ = watch.Modified
		}
		s.applyLocked(&event{typ: typ, rv: o.rv, obj: o, prev: prev}, !restart)
		s.enqueuePending(o)
	}
	for _, prev := range vanished {
		s.applyLocked(&event{typ: watch.Deleted, rv: s.rv, obj: prev, prev: prev}, false)
	}
	s.rv = max(s.rv, listRV)
	s.streamRV = max(s.streamRV, listRV)
	if restart {
		s.history.reset(s.rv)
		if s.synced {
			s.metrics.historyRestarts.Inc()
			klog.InfoS("A relist of the source restarted the resource's event history; its watches were ended and resumes from before the list answer 410",
				"resource", s.gvr.GroupResource().String(), "resourceVersion", s.rv, "changed", len(changed), "vanished", len(vanished))
		}
	}
	s.synced = true
	s.notifyLocked()
	klog.V(3).InfoS("Replaced store content", "resource", s.gvr.GroupResource().String(), "resourceVersion", s.rv,
		"objects", len(s.objects), "changed", len(changed), "vanished", len(vanished))
	return nil
}

// endWatchersLocked ends every watch of the store (their result channels close); their clients
// re-watch from their last resourceVersion. Called with s.mu held for writing.
func (s *ResourceStore) endWatchersLocked() {
	var all []*watcher
	for _, li := range s.locs {
		all = append(all, li.watchers...)
	}
	for _, w := range all {
		w.signalStop()
		s.unregisterLocked(w)
	}
}

// Resync implements cache.ReflectorStore; nothing to do.
func (s *ResourceStore) Resync() error { return nil }

// UpdateResourceVersion implements cache.ResourceVersionUpdater. The reflector calls it with
// the RV of bookmarks (and of events) so the store's ResourceVersion progresses even when no
// object changes; watchers that allow bookmarks get it with their next periodic BOOKMARK.
func (s *ResourceStore) UpdateResourceVersion(resourceVersion string) {
	rv, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		klog.ErrorS(err, "Ignoring invalid resourceVersion", "resource", s.gvr.GroupResource().String(), "resourceVersion", resourceVersion)
		return
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || !s.synced {
		return
	}
	s.streamRV = max(s.streamRV, rv)
	if rv <= s.rv {
		return
	}
	s.rv = rv
	s.notifyLocked()
}
