package placement

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
	"github.com/cluster-mapper/cluster-mapper/pkg/placement"
	"github.com/cluster-mapper/cluster-mapper/pkg/synctarget"
)

// entry is one Placement of the namespace being reconciled, with what this round found.
type entry struct {
	u      *unstructured.Unstructured
	pl     controlv1alpha1.Placement
	policy *placement.Policy
	err    error // the spec does not compile
	pool   placement.Pool
	live   bool // not being deleted
	// unbound are the locations the Placement selects that are not bound to its namespace
	// (bound.go), sorted.
	unbound []string

	placed    int64
	locations sets.Set[string]
	stuck     sets.Set[string]
	conflicts []controlv1alpha1.PlacementConflict
	lost      int // selected objects it does not place (conflicts other than YoungerPlacement)
}

// conflict records a conflict on e.
func (e *entry) conflict(gr schema.GroupResource, name, reason, message string) {
	e.conflicts = append(e.conflicts, controlv1alpha1.PlacementConflict{Resource: gr.String(), Name: name, Reason: reason, Message: message})
	if reason != controlv1alpha1.ConflictYoungerPlacement {
		e.lost++
	}
}

// selects reports whether e is a live Placement with a valid spec that selects obj of gvr.
func (e *entry) selects(gvr schema.GroupVersionResource, obj metav1.Object) bool {
	return e.live && e.policy != nil && slices.Contains(e.policy.Resources, gvr) && e.policy.SelectsObject(obj.GetLabels())
}

// reconcile places the objects of one namespace (key: see key) for all its Placements, then
// writes their statuses and finalizers. It writes nothing before the SyncTarget and object
// informers have synced: an unsynced cache must not unassign anything.
func (c *Controller) reconcile(ctx context.Context, k string) error {
	cluster, namespace := splitKey(k)
	now := c.now().Truncate(time.Second)
	entries := c.entries(cluster, namespace, now)
	if len(entries) == 0 {
		return nil
	}

	// The resources of every Placement, the deleting ones too (their assignments go), and
	// which of them a Placement divides: only those need the whole objects (spec.replicas);
	// the others are watched as metadata, which costs the source, the watch and the informer
	// a fraction of the bytes.
	var gvrs []schema.GroupVersionResource
	divided := sets.New[schema.GroupVersionResource]()
	for _, e := range entries {
		if e.policy == nil {
			continue
		}
		for _, gvr := range e.policy.Resources {
			if !slices.Contains(gvrs, gvr) {
				gvrs = append(gvrs, gvr)
			}
			if e.policy.Divide {
				divided.Insert(gvr)
			}
		}
	}
	infs := make([]toolscache.SharedIndexInformer, len(gvrs))
	kinds := make([]schema.GroupVersionKind, len(gvrs))
	for i, gvr := range gvrs {
		// Whole objects, once watched for one namespace, serve every namespace.
		infs[i] = c.watch(gvr, divided.Has(gvr) || c.watchesFull(gvr))
		if !infs[i].HasSynced() {
			c.queue.AddAfter(k, time.Second)
			return nil
		}
		gvk, err := c.mapper.KindFor(gvr)
		if err != nil {
			return fmt.Errorf("finding the kind of %s: %w", gvr, err)
		}
		kinds[i] = gvk
	}
	byName := map[string]*entry{}
	for _, e := range entries {
		byName[e.pl.Name] = e
	}
	var writes []*write
	for i, gvr := range gvrs {
		stored, err := infs[i].GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace)
		if err != nil {
			return err
		}
		objs := make([]metav1.Object, 0, len(stored))
		for _, obj := range stored {
			if o, err := meta.Accessor(obj); err == nil {
				objs = append(objs, o)
			}
		}
		slices.SortFunc(objs, func(a, b metav1.Object) int { return strings.Compare(a.GetName(), b.GetName()) })
		for _, o := range objs {
			if o.GetDeletionTimestamp() != nil || o.GetAnnotations()[contract.ClusterAnnotation] != cluster {
				continue
			}
			if w := c.placeObject(gvr, o, entries, byName); w != nil {
				w.gvk = kinds[i]
				writes = append(writes, w)
			}
		}
	}
	c.applyAll(ctx, writes)
	for _, w := range writes {
		if err := w.record(ctx); err != nil {
			return err
		}
	}

	var next time.Time
	for _, e := range entries {
		if !e.live {
			if err := c.finish(ctx, e); err != nil {
				return err
			}
			continue
		}
		if err := c.writeStatus(ctx, e); err != nil {
			return err
		}
		if n := e.pool.Next; !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	if !next.IsZero() {
		// Time alone changes the choices then: a tolerance runs out, or an evicted
		// location may be re-admitted.
		c.queue.AddAfter(k, next.Sub(c.now())+100*time.Millisecond)
	}
	return nil
}

// entries returns the Placements of the namespace, oldest first (creation, then name), each
// compiled, with its pool of locations at now; live ones get the finalizer.
func (c *Controller) entries(cluster, namespace string, now time.Time) []*entry {
	objs, _ := c.placements.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace)
	if len(objs) == 0 {
		// Most object events come from namespaces without Placements.
		return nil
	}
	locs, unbound := c.boundOnly(cluster, namespace, c.locations())
	var out []*entry
	for _, obj := range objs {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || u.GetAnnotations()[contract.ClusterAnnotation] != cluster {
			continue
		}
		e := &entry{u: u, live: u.GetDeletionTimestamp() == nil, locations: sets.New[string](), stuck: sets.New[string]()}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &e.pl); err != nil {
			e.err = err
		} else if e.policy, e.err = placement.Compile(&e.pl.Spec); e.err == nil {
			evictions := map[string]time.Time{}
			for _, ev := range e.pl.Status.Evictions {
				evictions[ev.Location] = ev.Time.Time
			}
			e.pool = e.policy.Pool(locs, evictions, now)
			for _, l := range unbound {
				if e.policy.MatchesLocation(l) {
					e.unbound = append(e.unbound, l.Name)
				}
			}
			slices.Sort(e.unbound)
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *entry) int {
		if c := a.u.GetCreationTimestamp().Compare(b.u.GetCreationTimestamp().Time); c != 0 {
			return c
		}
		return strings.Compare(a.u.GetName(), b.u.GetName())
	})
	return out
}

// locations returns every SyncTarget as a placement.Location; callers must not modify the
// slice. Every namespace's reconcile reads all locations, so the slice is kept until a
// SyncTarget event changes what placement reads (targetsChanged): the heartbeats' status
// writes (1,000 locations, every minute each) do not. Conversions are also kept per SyncTarget
// and resourceVersion: converting 1,000 SyncTargets each time cost more than deciding, and
// listing and re-keying them every round cost 9% of mapper-controller's CPU in the initial
// placement (bench scenario 10).
func (c *Controller) locations() []placement.Location {
	at := c.targetsChanged.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.locs != nil && c.locsAt == at {
		return c.locs
	}
	objs := c.targets.GetStore().List()
	out := make([]placement.Location, 0, len(objs))
	next := make(map[string]convertedLocation, len(objs))
	for _, obj := range objs {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		cached, ok := c.converted[u.GetName()]
		if !ok || cached.resourceVersion != u.GetResourceVersion() {
			st, err := synctarget.FromUnstructured(u)
			if err != nil {
				continue
			}
			cached = convertedLocation{resourceVersion: u.GetResourceVersion(), location: placement.LocationOf(st)}
		}
		next[u.GetName()] = cached
		out = append(out, cached.location)
	}
	c.converted = next
	c.locs, c.locsAt = out, at
	return out
}

// placeObject decides the assignment of one object: the oldest Placement that selects it
// places it. It returns the write that makes the object carry the decision, or nil when the
// object already does or nothing may be written; an object kept as it is counts as placed at
// once, a written one when its write succeeds (write.record). An object that no Placement
// selects loses an assignment a Placement of the namespace wrote, under these preconditions:
// the informers have synced (reconcile), the owner Placement exists and its spec compiles,
// and its field manager owns annotations on the object. An assignment naming a Placement that
// no longer exists stays. obj is the whole object (*unstructured.Unstructured) when a
// Placement divides its resource (reconcile), its metadata otherwise.
func (c *Controller) placeObject(gvr schema.GroupVersionResource, obj metav1.Object, entries []*entry, byName map[string]*entry) *write {
	gr := gvr.GroupResource()
	ann := obj.GetAnnotations()
	owner := ann[OwnerAnnotation]
	var selecting []*entry
	for _, e := range entries {
		if e.selects(gvr, obj) {
			selecting = append(selecting, e)
		}
	}
	if len(selecting) == 0 {
		prev := byName[owner]
		// A Placement whose spec does not compile selects nothing; its objects stay where they
		// are rather than lose their assignments to a typo.
		if owner == "" || prev == nil || prev.policy == nil || ownedAnnotations(obj, FieldManager).Len() == 0 {
			return nil
		}
		return &write{gvr: gvr, obj: obj, owner: owner}
	}
	assigned, hasAssignment := ann[contract.AssignedLocationsAnnotation]
	if hasAssignment && owner == "" {
		for _, e := range selecting {
			e.conflict(gr, obj.GetName(), controlv1alpha1.ConflictAssignedByOther, "kcp.io/assigned-locations was written by someone else (no "+OwnerAnnotation+" annotation); it is left alone")
		}
		return nil
	}
	w := selecting[0]
	for _, other := range selecting[1:] {
		other.conflict(gr, obj.GetName(), controlv1alpha1.ConflictOlderPlacement, fmt.Sprintf("the older Placement %s places it", w.pl.Name))
		w.conflict(gr, obj.GetName(), controlv1alpha1.ConflictYoungerPlacement, fmt.Sprintf("the younger Placement %s selects it too", other.pl.Name))
	}
	var current []string
	if hasAssignment {
		current, _ = contract.ParseLocations(assigned)
	}
	var replicas int64
	if w.policy.Divide {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			// Cannot happen: reconcile watches the whole objects of a divided resource.
			return nil
		}
		r, found, err := unstructured.NestedInt64(u.Object, "spec", "replicas")
		if !found || err != nil {
			w.conflict(gr, obj.GetName(), controlv1alpha1.ConflictNotDivisible, "replicas: Divide and the object has no integer spec.replicas; it is left alone")
			return nil
		}
		replicas = r
	}
	key := placement.ObjectKey(gr, ann[contract.ClusterAnnotation], obj.GetNamespace(), obj.GetName())
	d := w.policy.Decide(key, current, replicas, w.pool)
	w.stuck.Insert(d.Stuck...)
	if d.Keep {
		w.placed++
		w.locations.Insert(current...)
		return nil
	}
	if len(d.Locations) == 0 {
		// No location may take a new object (an assigned one gets Keep): nothing to write.
		return nil
	}
	want := desiredAnnotations(w.pl.Name, d, w.policy.Divide)
	if upToDate(obj, want) {
		w.placed++
		w.locations.Insert(d.Locations...)
		return nil
	}
	return &write{gvr: gvr, obj: obj, annotations: want, placer: w, decision: d}
}
